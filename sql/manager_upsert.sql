-- Finds or creates the manager of (session, contract) and returns its id.
INSERT INTO managers (session_id, contract, scope_path, depth, self_thread_id, session_file, cwd,
                      owner_pid, owner_started_at, host_id, boot_id, created_at, updated_at)
VALUES (:session_id, :contract, :scope_path, :depth, :self_thread_id, :session_file, :cwd,
        :owner_pid, :owner_started_at, :host_id, :boot_id, :now, :now)
ON CONFLICT (session_id, contract) DO UPDATE SET
    scope_path = excluded.scope_path,
    depth = excluded.depth,
    self_thread_id = excluded.self_thread_id,
    session_file = coalesce(excluded.session_file, managers.session_file),
    cwd = coalesce(excluded.cwd, managers.cwd),
    owner_pid = excluded.owner_pid,
    owner_started_at = excluded.owner_started_at,
    host_id = excluded.host_id,
    boot_id = excluded.boot_id,
    updated_at = excluded.updated_at
RETURNING id
