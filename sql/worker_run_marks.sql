-- Contract C run tracking: a thread's last event seq and newest interrupt command id.
SELECT t.last_seq,
       coalesce((SELECT max(c.id) FROM commands c WHERE c.thread_id = t.id AND c.kind = 'interrupt'), 0),
       t.status, t.exit_kind
FROM threads t WHERE t.id = ?1
