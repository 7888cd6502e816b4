-- The contract C workers of the given coordinators (:ids, a JSON array of coordinator session
-- ids), each with its report when it has one, ordered by coordinator then spawn key. Each id is
-- one seek into threads_by_spawn_key (coordinator_id, spawn_key); the IS NOT NULL terms match
-- that partial index's WHERE so the planner may use it; duplicate ids count once (IN).
SELECT t.id, t.coordinator_id, t.spawn_key, t.title, t.cwd, t.agent, t.outcome, t.hidden,
       r.verdict, r.summary, r.evidence
FROM threads t
JOIN managers m ON m.id = t.manager_id AND m.contract = 'worker'
LEFT JOIN reports r ON r.worker_id = t.id
WHERE t.coordinator_id IN (SELECT value FROM json_each(:ids))
  AND t.coordinator_id IS NOT NULL
  AND t.spawn_key IS NOT NULL
ORDER BY t.coordinator_id, t.spawn_key
