// Node-side assertions on results produced by the in-page `capture()` helper: the error
// contract of the package (Error, name 'WebDelegateError', string `code`, numeric `codeValue`)
// checked against the ErrorCode table of the API contract, written out here independently.
import assert from 'node:assert/strict';

export const ERROR_CODES = Object.freeze({
  Ok: 0x00,
  Internal: 0x01,
  InvalidState: 0x02,
  EndOfMethod: 0x03,
  AlreadyLoaded: 0x04,
  NotSupported: 0x10,
  NotImplemented: 0x11,
  InvalidArgument: 0x12,
  InvalidType: 0x13,
  OperatorMissing: 0x14,
  RegistrationExceedingMaxKernels: 0x15,
  RegistrationAlreadyRegistered: 0x16,
  NotFound: 0x20,
  MemoryAllocationFailed: 0x21,
  AccessFailed: 0x22,
  InvalidProgram: 0x23,
  InvalidExternalData: 0x24,
  OutOfResources: 0x25,
  DelegateInvalidCompatibility: 0x30,
  DelegateMemoryAllocationFailed: 0x31,
  DelegateInvalidHandle: 0x32,
});

/** Asserts a capture() result succeeded and returns its value. */
export function expectOk(result, what = 'call') {
  assert.ok(result.ok, `${what} should succeed but threw ${JSON.stringify(result.error)}`);
  return result.value;
}

/** Asserts a capture() result is a WebDelegateError with the given ErrorCode name. */
export function expectWdError(result, code, what = 'call') {
  assert.ok(code in ERROR_CODES, `unknown error code name ${code}`);
  assert.equal(result.ok, false, `${what} should throw ${code} but returned ${JSON.stringify(result.value)}`);
  const { isError, name, code: gotCode, codeValue } = result.error;
  assert.deepEqual(
    { isError, name, code: gotCode, codeValue },
    { isError: true, name: 'WebDelegateError', code, codeValue: ERROR_CODES[code] },
    `${what}: wrong error (message: ${result.error.message})`,
  );
  return result.error;
}
