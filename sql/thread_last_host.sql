-- The host a thread's process last ran on (threads.host_id, kept when it closes): a resume
-- on another host names it. Primary-key lookup.
SELECT host_id FROM threads WHERE id = ?1
