-- The web view's detail (issue 50): the messages sent into thread ?1 after its prompt (a
-- `thread` tool send or a web page's, recorded delivered by the serve that delivered it;
-- contract B's steers; contract C's messages), newest first, at most ?2. One range of the
-- mailbox's (thread_id, send_key) key; the few rows are sorted by id.
SELECT {web_sent_row}
FROM mailbox mb
WHERE mb.thread_id = ?1 AND mb.direction = 'to_child'
ORDER BY mb.id DESC
LIMIT ?2
