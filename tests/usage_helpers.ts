/**
 * The usage the fixture agent reports with `--usage turn`
 * (`tests/fixtures/agent_updates.ts`), as a run event carries it.
 *
 * @module
 */

/** The token counts the fixture agent reports over `turns` turns. */
export function fixtureTurnTokens(turns = 1): Record<string, number> {
  return {
    prompt_tokens: 100 * turns,
    completion_tokens: 20 * turns,
    total_tokens: 162 * turns,
    cached_read_tokens: 30 * turns,
    cached_write_tokens: 5 * turns,
    thought_tokens: 7 * turns,
  };
}

/**
 * A `run.completed`'s `usage` for the fixture agent's `turn`th turn of one
 * conversation: one turn's tokens, the context used so far and the turn's cost.
 */
export function fixtureTurnUsage(turn = 1, currency = "USD") {
  return {
    ...fixtureTurnTokens(),
    used: 1000 * turn,
    size: 200000,
    cost: { amount: 0.25, currency },
  };
}
