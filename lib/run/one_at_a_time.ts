/**
 * Calls with the same key, one after the other: the run manager handles the
 * starts of one conversation in order, each after the previous one settled.
 *
 * @module
 */

/** Runs `body` after every earlier call with the same key has settled. */
export function oneAtATime<T>(
  queues: Map<string, Promise<void>>,
  key: string | undefined,
  body: () => Promise<T>,
): Promise<T> {
  if (key === undefined) return body();
  const result = (queues.get(key) ?? Promise.resolve()).then(body);
  const tail = result.then(() => {}, () => {});
  queues.set(key, tail);
  void tail.then(() => {
    if (queues.get(key) === tail) queues.delete(key);
  });
  return result;
}
