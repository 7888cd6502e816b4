-- threadbase schema, version 2: contract B's lifecycle requests and notice routing.

-- A pause (`agent_pause`) or stop (`agent_stop`) asked of a contract B thread. Both take
-- effect when its run settles (or its process closes) and are cleared when it is resumed.
ALTER TABLE threads ADD COLUMN agent_pause_requested INTEGER NOT NULL DEFAULT 0
    CHECK (agent_pause_requested IN (0, 1));
ALTER TABLE threads ADD COLUMN agent_stop_requested INTEGER NOT NULL DEFAULT 0
    CHECK (agent_stop_requested IN (0, 1));

-- The agent path a contract B notice is for (`/root`, or a parent agent's thread path); NULL
-- for the other contracts' notices, which go to their manager's session.
ALTER TABLE mailbox ADD COLUMN recipient_path TEXT;

-- Why: each serve delivers the pending notices addressed to its own agent path after every
-- data_version change; this partial index holds only those rows, so the read is a short range.
CREATE INDEX mailbox_agent_notices ON mailbox (recipient_path, id)
    WHERE state = 'pending' AND recipient_path IS NOT NULL;

-- Why: contract B's concurrency limit counts the working threads of one registry at every
-- spawn and resume, inside the reserving transaction; the partial index holds only those.
CREATE INDEX threads_agent_active ON threads (manager_id)
    WHERE agent_state IN ('starting', 'running');
