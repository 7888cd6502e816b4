-- The budgets kept in the database (V15): a row per scope that has one, `team` and `tree`. Read
-- by every budget check, inside the transaction that reserves the work. At most two rows.
SELECT {budget_row} FROM budgets ORDER BY scope
