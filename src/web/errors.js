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
