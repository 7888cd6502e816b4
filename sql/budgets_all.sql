-- The budgets kept in the database (V15, V18): a row per scope that has one, `team`, `thread`
-- and `tree`. Read by every budget check, inside the transaction that reserves the work, and
-- by the cap watch of a serve's children. At most three rows.
SELECT {budget_row} FROM budgets ORDER BY scope
