// The JavaScript face of a webdelegate error: a real Error subclass carrying ExecuTorch's code
// name (`code`, e.g. "NotFound") and numeric value (`codeValue`, e.g. 0x20).
export class WebDelegateError extends Error {
  constructor(code, codeValue, message) {
    super(message);
    this.name = 'WebDelegateError';
    this.code = code;
    this.codeValue = codeValue;
  }
}

export function makeWebDelegateError(code, codeValue, message) {
  return new WebDelegateError(code, codeValue, message);
}

// The parameter providers' errors: IREE status codes (`code`, e.g. "NOT_FOUND"; `codeValue`,
// e.g. 5). A WebDelegateError too, so one `instanceof` check catches every package error.
export class StatusError extends WebDelegateError {
  constructor(code, codeValue, message) {
    super(code, codeValue, message);
    this.name = 'StatusError';
  }
}

export function makeStatusError(code, codeValue, message) {
  return new StatusError(code, codeValue, message);
}
