-- Answers a question once: only while it is still pending, so no question is answered twice
-- (and none after its timeout, stop or crash ended it).
UPDATE ui_requests SET state = 'answered', answer = :answer, answered_at = :at, answered_by = :by
WHERE id = :id AND state = 'pending'
