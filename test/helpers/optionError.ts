import { InvalidOptionError } from '../../src';

/** Runs `fn`, expects it to throw an InvalidOptionError and returns it (to assert its option). */
export function optionError(fn: () => unknown): InvalidOptionError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidOptionError);
    return err as InvalidOptionError;
  }
  throw new Error('expected an InvalidOptionError');
}
