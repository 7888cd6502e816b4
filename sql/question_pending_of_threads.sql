-- The oldest pending question of each thread in the JSON array ?1, as sql/question_pending.sql
-- reads one: a thread without one has no row. Per id, the smallest pending id
-- (ui_requests_pending), then that row by primary key. For a list batch's facts: one query
-- whatever the batch's size.
SELECT u.id, u.thread_id, u.request_id, u.kind, u.title, u.message, u.options, u.asked_at,
       u.deadline_ms, u.state, u.answer, u.answered_at, u.answered_by
FROM json_each(?1) AS j
JOIN ui_requests u
  ON u.id = (SELECT min(p.id) FROM ui_requests p WHERE p.thread_id = j.value AND p.state = 'pending')
