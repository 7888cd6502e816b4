-- Contract C: reserves a worker, a top-level row at /<workerID> under its coordinator's worker
-- manager, with its spawn key, fingerprint, grants, the model its args name (if any) and the
-- message ids every retry reuses.
INSERT INTO threads (id, manager_id, path, parent_path, parent_id, task_name, name, depth, cwd,
                     args, status, phase, session_id, coordinator_id, spawn_key, fingerprint, title,
                     agent, model, granted_paths, initial_message_id, report_message_id,
                     created_at, updated_at, last_event_at, live_started_at)
VALUES (:id, :manager_id, '/' || :id, NULL, NULL, :id, :title, 0, :cwd,
        :args, 'live', 'starting', :id, :coordinator_id, :spawn_key, :fingerprint, :title,
        :agent, :model, :granted_paths, :initial_message_id, :report_message_id,
        :now, :now, :now, :now)
