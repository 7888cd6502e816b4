-- A child's last get_state answer about its session: its name and pending message count.
UPDATE thread_output SET session_name = ?2, pending_message_count = ?3 WHERE thread_id = ?1
