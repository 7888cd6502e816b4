-- Contract C run tracking: a thread's last event seq and newest interrupt command id.
SELECT {worker_run_marks_row}
FROM threads t WHERE t.id = ?1
