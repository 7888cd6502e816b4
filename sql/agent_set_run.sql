-- What a contract B thread's runs are launched with: its resolved model, thinking level and
-- tool set (by the thread's key).
UPDATE threads SET agent_model = :model, agent_thinking = :thinking, agent_tools = :tools
WHERE id = :id
