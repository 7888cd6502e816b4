-- What a contract A notice says about a thread (its title, path, state, exit and answer), read
-- in the transaction that settles or closes it, by primary key. No row for a thread of another
-- contract: contract B has notices of its own, contract C its reports.
SELECT t.name, t.path, t.status, t.phase, t.exit_kind, t.exit_code, t.exit_signal,
       t.exit_message, t.launch_seq, t.last_seq, o.last_assistant_text
FROM threads t
JOIN managers m ON m.id = t.manager_id
LEFT JOIN thread_output o ON o.thread_id = t.id
WHERE t.id = ?1 AND m.contract = 'thread'
