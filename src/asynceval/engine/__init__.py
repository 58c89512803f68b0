"""The evaluation engine (layer 7 of DESIGN section 1): tasks, the Benchmark lifecycle, the
scheduler, queues, reports and results files. Imports the models, the funnel (usage counting,
stream leases), the runtime and the layers below; agents, tools, evaluation and the edges
import it."""

from typing import TYPE_CHECKING, Any

from ._adaptive_repeats import AdaptiveRepeats
from .adaptive import AdaptiveQueue
from .benchmark import Benchmark, Evaluator
from .callbacks import BenchmarkCallback
from .context import TaskContext, current_context
from .queues import PriorityQueue, SequentialQueue, TaskQueue
from .registry import ComponentRegistry
from .report import REPORT_KEYS
from .results import read_records, successful_pairs
from .run_reports import RunReports
from .status import TaskExecutionStatus, TerminationReason
from .task import Task, TaskProtocol, TimeoutAction

if TYPE_CHECKING:
    from .datasets import iter_tasks, load_tasks

__all__ = [
    "REPORT_KEYS",
    "AdaptiveQueue",
    "AdaptiveRepeats",
    "Benchmark",
    "BenchmarkCallback",
    "ComponentRegistry",
    "Evaluator",
    "PriorityQueue",
    "RunReports",
    "SequentialQueue",
    "Task",
    "TaskContext",
    "TaskExecutionStatus",
    "TaskProtocol",
    "TaskQueue",
    "TerminationReason",
    "TimeoutAction",
    "current_context",
    "iter_tasks",
    "load_tasks",
    "read_records",
    "successful_pairs",
]


def __getattr__(name: str) -> Any:
    # The task file readers (`datasets`: CSV, JSONL, Parquet, Hugging Face, a source's hash)
    # load with their first use, not with `import asynceval`.
    if name in ("iter_tasks", "load_tasks"):
        from . import datasets

        value = getattr(datasets, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
