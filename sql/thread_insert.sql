-- Reserves a thread row, for all three contracts (contract B's and C's columns are NULL for
-- the others); UNIQUE (manager_id, path) refuses a second thread at one path.
INSERT INTO threads (id, manager_id, path, parent_path, parent_id, task_name, name, depth, cwd,
                     args, status, phase, agent_state, session_file, session_id, prompt, task,
                     coordinator_id, spawn_key, fingerprint, title, agent, model, granted_paths,
                     initial_message_id, report_message_id,
                     created_at, updated_at, last_event_at, live_started_at)
VALUES (:id, :manager_id, :path, :parent_path, :parent_id, :task_name, :name, :depth, :cwd,
        :args, :status, :phase, :agent_state, :session_file, :session_id, :prompt, :task,
        :coordinator_id, :spawn_key, :fingerprint, :title, :agent, :model, :granted_paths,
        :initial_message_id, :report_message_id,
        :now, :now, :now, CASE WHEN :status = 'live' THEN :now END)
