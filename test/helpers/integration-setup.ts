/** Jest setup for the integration project: real broker round trips (and check-backs) take seconds. */
jest.setTimeout(120_000);
