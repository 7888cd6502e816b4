use super::*;
use serde_json::json;

#[test]
fn one_message_as_pi_reports_it() {
    // The shape real Pi 1.6 writes (benches/data/pi16_events.jsonl), with cache tokens.
    let msg = json!({"role": "assistant", "content": [
                {"type": "text", "text": "x"},
                {"type": "toolCall", "id": "c1", "name": "bash", "arguments": {}},
                {"type": "toolCall", "id": "c2", "name": "read", "arguments": {}}],
            "usage": {"input": 10, "output": 5, "cacheRead": 7, "cacheWrite": 3, "reasoning": 0,
                      "totalTokens": 25,
                      "cost": {"input": 0.1, "output": 0.2, "cacheRead": 0.0, "cacheWrite": 0.0,
                               "total": 0.30000000000000004, "totalFromProvider": false}}});
    let u = Usage::of_assistant_message(&msg);
    assert_eq!(
        u,
        Usage {
            input_tokens: 10,
            output_tokens: 5,
            cache_read_tokens: 7,
            cache_write_tokens: 3,
            cost_usd: 0.30000000000000004,
            turns: 1,
            tool_calls: 2,
        }
    );
    assert_eq!(u.total_tokens(), 25);
}

#[test]
fn malformed_usage_counts_as_zero() {
    for usage in [
        json!(null),
        json!("lots"),
        json!({"input": -5, "output": "7", "cacheRead": 1e300, "cost": {"total": -1}}),
        json!({"input": f64::NAN, "cost": {"total": "free"}}),
    ] {
        let u = Usage::of_assistant_message(&json!({"role": "assistant", "usage": usage}));
        assert_eq!(u.input_tokens, 0);
        assert_eq!(u.output_tokens, 0);
        assert!(u.cache_read_tokens >= 0);
        assert_eq!(u.cost_usd, 0.0);
        assert_eq!(u.turns, 1);
    }
}
