/**
 * `location=local` (`lib/locations/local.ts`) through the shared location
 * cases (`location_suite.ts`): the agent runs on this machine.
 */

import { locationSuite, openManager } from "./location_suite.ts";

locationSuite({
  name: "local",
  open: () => Promise.resolve(openManager({ config: {} })),
});
