"""Binding a Runtime: `async with rt:` makes it current in that context only."""

from __future__ import annotations

import anyio

from asynceval import Runtime, Settings


async def test_a_runtime_bound_in_two_tasks_at_once_unbinds_cleanly() -> None:
    """`async with rt:` in two concurrent tasks: each sees rt inside and the default after."""
    rt = Runtime(Settings(max_concurrent_llm_calls=7))
    default = Runtime.current()
    seen: list[int] = []

    async def use(delay: float) -> None:
        async with rt:
            await anyio.sleep(delay)
            seen.append(Runtime.current().limiter.limit)
        assert Runtime.current() is default

    async with anyio.create_task_group() as tg:
        tg.start_soon(use, 0.01)  # entered first, leaves first: not last-in-first-out
        tg.start_soon(use, 0.05)
    assert seen == [7, 7]


def test_the_process_default_is_one_object_for_every_thread() -> None:
    """Threads racing for the first `Runtime.current()` all get the same runtime."""
    import threading

    from asynceval.runtime import set_process_default

    set_process_default()
    seen: list[Runtime] = []
    start = threading.Barrier(8)

    def grab() -> None:
        start.wait()
        seen.append(Runtime.current())

    threads = [threading.Thread(target=grab) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert len(seen) == 8 and len({id(rt) for rt in seen}) == 1


async def test_a_bound_runtime_reaches_models_and_benchmarks_inside_only() -> None:
    from asynceval import OpenAIChatModel
    from asynceval.sim import SimConfig

    rt = Runtime(Settings(max_concurrent_llm_calls=2))
    model = OpenAIChatModel(sim_config=SimConfig(latency=0))
    async with rt:
        await model.generate("hi")
    await model.generate("hi")
    assert rt.limiter.statistics().granted == 1
    assert Runtime.current().limiter.statistics().granted == 1
