"""The four tables of the frames as DuckDB SQL over the files' relations (`_frames_files`):
`_events_all` (every event line of every directory) and `_results_all` (every results line),
plus `_dirs` and `_segments` (what the directories and their manifests say). Each view's
columns are listed in `frames`' docstring; the SQL says how each is derived.
"""

from __future__ import annotations

# A repetition's score as `asynceval.engine.report.eval_score` computes it from its evaluator
# entries: entries with a boolean "passed" decide (1.0 when all passed, else 0.0); otherwise
# the mean of numeric "score" values in [0, 1]; None when neither. (The SQL twin of that
# function: tests/frames checks the two agree.)
SCORE_MACRO = """
CREATE OR REPLACE TEMP MACRO _asynceval_score(ev) AS (
    CASE
        WHEN json_type(ev) IS DISTINCT FROM 'ARRAY' THEN NULL
        WHEN len(list_filter(CAST(ev AS JSON[]),
                lambda e: json_type(e -> 'passed') = 'BOOLEAN')) > 0
            THEN CASE WHEN list_bool_and(list_transform(
                    list_filter(CAST(ev AS JSON[]),
                        lambda e: json_type(e -> 'passed') = 'BOOLEAN'),
                    lambda e: TRY_CAST(e ->> 'passed' AS BOOLEAN))) THEN 1.0 ELSE 0.0 END
        ELSE list_avg(list_transform(
            list_filter(CAST(ev AS JSON[]),
                lambda e: json_type(e -> 'score') IN ('BIGINT', 'UBIGINT', 'DOUBLE')
                    AND TRY_CAST(e ->> 'score' AS DOUBLE) BETWEEN 0 AND 1),
            lambda e: TRY_CAST(e ->> 'score' AS DOUBLE)))
    END
)"""

EVENTS = """
CREATE OR REPLACE TEMP VIEW events AS
SELECT * EXCLUDE (_dir) FROM _events_all"""
# (No ORDER BY: DuckDB keeps insertion order, which is each file's, one directory after the
# other; sorting 1.1 million rows again cost a second.)

REPORTS = """
CREATE OR REPLACE TEMP VIEW _reports AS
SELECT * FROM _results_all
WHERE task_id IS NOT NULL AND type IS DISTINCT FROM 'header'"""

REPETITIONS = """
CREATE OR REPLACE TEMP VIEW repetitions AS
SELECT run_id, seq, task_id, repeat_idx, status, termination_reason,
    CASE WHEN status IN ('success', 'evaluation_failed') THEN _asynceval_score(eval) END
        AS score,
    row_number() OVER (PARTITION BY _dir, task_id, repeat_idx ORDER BY seq DESC) = 1
        AS latest,
    attempts,
    CASE WHEN status = 'budget_exhausted' THEN 'budget_exhausted' ELSE error.kind END
        AS error_kind,
    error.type AS error_type, error.message AS error_message,
    to_timestamp(timing.finished_at - timing.duration_s) AS started_at,
    to_timestamp(timing.finished_at) AS finished_at,
    timing.duration_s AS duration_s, timing.queued_s AS queued_s,
    usage.llm_calls AS llm_calls, usage.failed_calls AS failed_calls,
    usage.retries AS retries, usage.prompt_tokens AS prompt_tokens,
    usage.completion_tokens AS completion_tokens, usage.cached_tokens AS cached_tokens,
    usage.cache_hits AS cache_hits, usage.journal_hits AS journal_hits,
    usage.hedges AS hedges, usage.cost_usd AS cost_usd,
    usage.unpriced_calls AS unpriced_calls, usage.by_model::VARCHAR AS cost_by_model,
    eval::VARCHAR AS eval
FROM _reports
ORDER BY _dir, seq"""

# One row per (run_id, call_id): the call's slot events (every attempt's queueing, acquired,
# released; retry, timeout, llm_call_failed, cancelled; cache and journal hits) and, in the
# batch lane, the batches that carried it (`batch_submitted` names its call_ids; the batch's
# `batch_completed` ends it).
CALLS = """
CREATE OR REPLACE TEMP VIEW calls AS
WITH slot AS (
    SELECT run_id, call_id,
        max(task_id) AS task_id, max(repeat_idx) AS repeat_idx,
        max(agent) AS agent, max(dimension) AS dimension,
        count(*) FILTER (WHERE event = 'acquired') AS attempts,
        count(*) FILTER (WHERE event = 'retry') AS retries,
        count(*) FILTER (WHERE event = 'timeout') AS timeouts,
        min(timestamp) AS first_at, max(timestamp) AS last_at,
        sum(wait_s) FILTER (WHERE event = 'acquired') AS wait_s,
        sum(held_s) FILTER (WHERE event = 'released') AS held_s,
        sum(cost_usd) FILTER (WHERE event = 'released') AS cost_usd,
        coalesce(bool_or(fields IS NOT NULL AND fields ->> 'unpriced' = 'true')
            FILTER (WHERE event = 'released'), false) AS unpriced,
        coalesce(bool_or(fields IS NOT NULL AND fields ->> 'cost_unknown' = 'true')
            FILTER (WHERE event = 'released'), false) AS cost_unknown,
        arg_max(status_code, seq) FILTER (WHERE status_code IS NOT NULL) AS status_code,
        arg_max(error, seq) FILTER (WHERE error IS NOT NULL) AS error,
        arg_max(event, seq) AS last_event,
        bool_or(event = 'llm_call_failed') AS failed,
        bool_or(event = 'cache_hit') AS cache_hit,
        bool_or(event = 'journal_hit') AS journal_hit,
        bool_or(event = 'hedge_sent') AS hedged
    FROM _events_all
    WHERE call_id IS NOT NULL
    GROUP BY run_id, call_id
), lines AS (
    SELECT run_id, unnest(from_json(fields -> 'call_ids', '["VARCHAR"]')) AS call_id,
        batch_id, timestamp, seq
    FROM _events_all
    WHERE event = 'batch_submitted'
), batched AS (
    SELECT run_id, call_id, count(*) AS batches, arg_max(batch_id, seq) AS batch_id,
        min(timestamp) AS submitted_at
    FROM lines
    GROUP BY run_id, call_id
), ended AS (
    SELECT run_id, batch_id, max(timestamp) AS completed_at
    FROM _events_all
    WHERE event = 'batch_completed'
    GROUP BY run_id, batch_id
), lanes AS (
    SELECT run_id, arg_max(fields ->> 'llm_lane', seq) AS lane
    FROM _events_all
    WHERE event = 'run_started'
    GROUP BY run_id
), joined AS (
    SELECT coalesce(s.run_id, b.run_id) AS run_id, coalesce(s.call_id, b.call_id) AS call_id,
        s.*, b.batches, b.batch_id, b.submitted_at, e.completed_at
    FROM slot AS s
    FULL OUTER JOIN batched AS b ON s.run_id = b.run_id AND s.call_id = b.call_id
    LEFT JOIN ended AS e ON e.run_id = b.run_id AND e.batch_id = b.batch_id
)
SELECT j.run_id, j.call_id, j.task_id, j.repeat_idx, j.agent, j.dimension,
    CASE WHEN j.batches IS NOT NULL THEN 'batch' ELSE coalesce(l.lane, 'live') END AS lane,
    CASE
        WHEN j.failed THEN 'failed'
        WHEN j.cache_hit THEN 'cache_hit'
        WHEN j.journal_hit THEN 'journal_hit'
        WHEN j.batches IS NOT NULL AND j.completed_at IS NOT NULL THEN 'answered'
        WHEN j.batches IS NULL AND j.last_event = 'released' THEN 'answered'
        WHEN j.last_event = 'cancelled' THEN 'cancelled'
        ELSE 'unfinished'
    END AS outcome,
    coalesce(j.attempts, 0) AS attempts, coalesce(j.retries, 0) AS retries,
    coalesce(j.timeouts, 0) AS timeouts,
    least(j.first_at, j.submitted_at) AS started_at,
    greatest(j.last_at, j.completed_at) AS ended_at,
    date_diff('microsecond', least(j.first_at, j.submitted_at),
        greatest(j.last_at, j.completed_at)) / 1e6 AS elapsed_s,
    j.wait_s, j.held_s, j.cost_usd, coalesce(j.unpriced, false) AS unpriced,
    coalesce(j.cost_unknown, false) AS cost_unknown, j.status_code, j.error,
    coalesce(j.hedged, false) AS hedged, j.batch_id, coalesce(j.batches, 0) AS batches
FROM joined AS j
LEFT JOIN lanes AS l ON l.run_id = j.run_id
ORDER BY j.run_id, started_at, j.call_id"""

# One row per segment of each directory: the ids its manifest's segments, its results file's
# headers, its run_started events and its reports name, with what each source knows of it.
RUNS = """
CREATE OR REPLACE TEMP VIEW runs AS
WITH headers AS (
    SELECT _dir, run_id, arg_min(started_at, seq) AS started_at,
        arg_min(benchmark, seq) AS benchmark, arg_min(resumed, seq) AS resumed,
        arg_min(max_concurrent_llm_calls, seq) AS max_concurrent_llm_calls,
        arg_min(max_concurrent_tasks, seq) AS max_concurrent_tasks,
        arg_min(asynceval_version, seq) AS asynceval_version,
        arg_min(python, seq) AS python, arg_min(settings, seq) AS settings
    FROM _results_all
    WHERE type = 'header' AND run_id IS NOT NULL
    GROUP BY _dir, run_id
), started AS (
    SELECT _dir, run_id, arg_min(timestamp, seq) AS started_at,
        arg_min(fields, seq) AS fields
    FROM _events_all
    WHERE event = 'run_started' AND run_id IS NOT NULL
    GROUP BY _dir, run_id
), finished AS (
    SELECT _dir, run_id, arg_max(timestamp, seq) AS finished_at,
        arg_max(duration_s, seq) AS duration_s, arg_max(cost_usd, seq) AS cost_usd,
        arg_max(fields, seq) AS fields
    FROM _events_all
    WHERE event = 'run_finished' AND run_id IS NOT NULL
    GROUP BY _dir, run_id
), reports AS (
    SELECT _dir, run_id, count(*) AS repetitions, sum(usage.cost_usd) AS cost_usd
    FROM _reports
    WHERE run_id IS NOT NULL
    GROUP BY _dir, run_id
), ids AS (
    SELECT _dir, run_id FROM _segments
    UNION SELECT _dir, run_id FROM headers
    UNION SELECT _dir, run_id FROM started
    UNION SELECT _dir, run_id FROM reports
), rows AS (
    SELECT i._dir, i.run_id, d.run_dir, d.run_dir_id, m.segment AS manifest_segment,
        coalesce(s.started_at, TRY_CAST(h.started_at AS TIMESTAMPTZ),
            TRY_CAST(m.manifest_started_at AS TIMESTAMPTZ)) AS started_at,
        coalesce(m.resumed, h.resumed, (s.fields ->> 'resumed_pairs')::BIGINT > 0) AS resumed,
        f.finished_at, f.duration_s,
        (f.fields ->> 'interrupted')::BOOLEAN AS interrupted,
        coalesce(h.benchmark, s.fields ->> 'benchmark', m.benchmark) AS benchmark,
        m.target,
        coalesce(TRY_CAST(s.fields ->> 'n_task_repeats' AS BIGINT),
            TRY_CAST(m.repeats AS BIGINT)) AS repeats,
        TRY_CAST(s.fields ->> 'n_tasks' AS BIGINT) AS n_tasks,
        coalesce(s.fields ->> 'llm_lane', m.lane, h.settings ->> 'llm_lane') AS lane,
        coalesce(m.model, h.settings ->> 'llm_model') AS model,
        coalesce(m.base_url, h.settings ->> 'llm_base_url') AS base_url,
        coalesce(TRY_CAST(s.fields ->> 'max_concurrent_llm_calls' AS BIGINT),
            h.max_concurrent_llm_calls) AS max_concurrent_llm_calls,
        coalesce(TRY_CAST(s.fields ->> 'max_concurrent_tasks' AS BIGINT),
            h.max_concurrent_tasks) AS max_concurrent_tasks,
        coalesce(r.repetitions, 0) AS repetitions,
        coalesce(f.cost_usd, r.cost_usd) AS cost_usd,
        (f.fields -> 'counts')::VARCHAR AS counts,
        coalesce(h.asynceval_version, m.asynceval_version) AS asynceval_version,
        h.python AS python_version, m.host, m.pid, m.argv, h.settings::VARCHAR AS settings
    FROM ids AS i
    JOIN _dirs AS d ON d._dir = i._dir
    LEFT JOIN _segments AS m ON m._dir = i._dir AND m.run_id = i.run_id
    LEFT JOIN headers AS h ON h._dir = i._dir AND h.run_id = i.run_id
    LEFT JOIN started AS s ON s._dir = i._dir AND s.run_id = i.run_id
    LEFT JOIN finished AS f ON f._dir = i._dir AND f.run_id = i.run_id
    LEFT JOIN reports AS r ON r._dir = i._dir AND r.run_id = i.run_id
), ordered AS (
    SELECT *, row_number() OVER (PARTITION BY _dir
        ORDER BY manifest_segment NULLS LAST, started_at NULLS LAST, run_id) - 1 AS segment
    FROM rows
)
SELECT run_id,
    coalesce(run_dir_id, first_value(run_id) OVER (PARTITION BY _dir ORDER BY segment))
        AS run_dir_id,
    run_dir, segment, coalesce(resumed, segment > 0) AS resumed, started_at, finished_at,
    duration_s, interrupted, benchmark, target, repeats, n_tasks, lane, model, base_url,
    max_concurrent_llm_calls, max_concurrent_tasks, repetitions, cost_usd, counts,
    asynceval_version, python_version, host, pid, argv, settings
FROM ordered
ORDER BY _dir, segment"""
