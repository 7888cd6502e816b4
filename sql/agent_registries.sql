-- Every contract B registry (a `managers` row of contract `agent`) with its main session, for
-- `threadbase reap` (UNIQUE (session_id, contract) does not lead with contract: a scan of the
-- managers, a small table, run once per command).
SELECT {agent_registry_row} FROM managers WHERE contract = 'agent' ORDER BY id
