-- What a contract A notice says about a thread (its title, path, state, exit and answer), read
-- in the transaction that settles or closes it, by primary key. No row for a thread of another
-- contract: contract B has notices of its own, contract C its reports.
SELECT {notice_facts_row}
FROM threads t
JOIN managers m ON m.id = t.manager_id
LEFT JOIN thread_output o ON o.thread_id = t.id
WHERE t.id = ?1 AND m.contract = 'thread'
