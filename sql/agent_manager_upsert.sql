-- Finds or creates a contract B registry (one per main session) and returns its id. Only the
-- main conversation's serve passes its session file and itself as owner; a child agent's serve
-- passes NULLs and changes neither.
INSERT INTO managers (session_id, contract, scope_path, depth, session_file, cwd, owner_pid,
                      owner_started_at, host_id, boot_id, created_at, updated_at)
VALUES (:session_id, 'agent', '/root', 0, :session_file, :cwd, :owner_pid, :owner_started_at,
        :host_id, :boot_id, :now, :now)
ON CONFLICT (session_id, contract) DO UPDATE SET
    session_file = coalesce(excluded.session_file, managers.session_file),
    cwd = coalesce(excluded.cwd, managers.cwd),
    owner_pid = coalesce(excluded.owner_pid, managers.owner_pid),
    owner_started_at = CASE WHEN excluded.owner_pid IS NULL THEN managers.owner_started_at
                            ELSE excluded.owner_started_at END,
    host_id = CASE WHEN excluded.owner_pid IS NULL THEN managers.host_id
                      ELSE excluded.host_id END,
    boot_id = CASE WHEN excluded.owner_pid IS NULL THEN managers.boot_id
                      ELSE excluded.boot_id END,
    updated_at = excluded.updated_at
RETURNING {agent_registry_upsert_row}
