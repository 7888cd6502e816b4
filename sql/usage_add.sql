-- Adds one batch of a thread's completed assistant messages to its usage row (primary key);
-- the trigger thread_usage_rolled_up moves its tree's total in tree_usage by the same amount.
UPDATE thread_usage SET
    input_tokens = input_tokens + :input,
    output_tokens = output_tokens + :output,
    cache_read_tokens = cache_read_tokens + :cache_read,
    cache_write_tokens = cache_write_tokens + :cache_write,
    cost_usd = cost_usd + :cost,
    turns = turns + :turns,
    tool_calls = tool_calls + :tool_calls,
    updated_at = :at
WHERE thread_id = :id
