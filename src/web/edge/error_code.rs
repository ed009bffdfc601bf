//! The `ErrorCode` enum JavaScript sees: ExecuTorch's codes (name -> number), exported under
//! that name so `wd.ErrorCode.NotFound === 0x20` and `e.codeValue === wd.ErrorCode[e.code]`.
//!
//! [`crate::error::ErrorCode`] is the runtime's own and knows nothing of JavaScript; this is its
//! exported mirror. They cannot drift apart: every value is checked against the runtime's at
//! compile time, and the two [`From`] conversions match every variant of each (a code added to
//! one fails to compile until it is mirrored in the other).

use crate::error::ErrorCode;
use wasm_bindgen::prelude::*;

/// ExecuTorch's `runtime/core/error.h` codes, with their exact numeric values.
#[wasm_bindgen(js_name = ErrorCode)]
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum JsErrorCode {
    /// Status indicating a successful operation.
    Ok = 0x00,
    /// An internal error occurred.
    Internal = 0x01,
    /// Status indicating the executor is in an invalid state for the requested operation.
    InvalidState = 0x02,
    /// Status indicating there are no more steps of execution to run.
    EndOfMethod = 0x03,
    /// A method or program was already loaded.
    AlreadyLoaded = 0x04,
    /// The operation is not supported in the current context.
    NotSupported = 0x10,
    /// The operation is not implemented.
    NotImplemented = 0x11,
    /// User provided an invalid argument.
    InvalidArgument = 0x12,
    /// Object is an invalid type for the operation.
    InvalidType = 0x13,
    /// An operator in the program is missing from the kernel registry.
    OperatorMissing = 0x14,
    /// The kernel registry is full.
    RegistrationExceedingMaxKernels = 0x15,
    /// The kernel is already registered.
    RegistrationAlreadyRegistered = 0x16,
    /// The requested resource could not be found.
    NotFound = 0x20,
    /// Could not allocate the requested memory.
    MemoryAllocationFailed = 0x21,
    /// Could not access a resource.
    AccessFailed = 0x22,
    /// Error caused by the contents of a program.
    InvalidProgram = 0x23,
    /// Error caused by the contents of external data.
    InvalidExternalData = 0x24,
    /// Does not have enough resources to perform the requested operation.
    OutOfResources = 0x25,
    /// Init stage: the backend cannot run the processed blob it was given.
    DelegateInvalidCompatibility = 0x30,
    /// Init stage: the backend failed to allocate memory.
    DelegateMemoryAllocationFailed = 0x31,
    /// Execute stage: the handle is invalid.
    DelegateInvalidHandle = 0x32,
}

/// Checks each mirrored value against [`ErrorCode`]'s at compile time and writes the two
/// exhaustive conversions.
macro_rules! mirror {
    ($($name:ident),* $(,)?) => {
        const _: () = {
            $(assert!(JsErrorCode::$name as u32 == ErrorCode::$name as u32);)*
        };

        impl From<ErrorCode> for JsErrorCode {
            fn from(code: ErrorCode) -> Self {
                match code {
                    $(ErrorCode::$name => Self::$name,)*
                }
            }
        }

        impl From<JsErrorCode> for ErrorCode {
            fn from(code: JsErrorCode) -> Self {
                match code {
                    $(JsErrorCode::$name => Self::$name,)*
                }
            }
        }
    };
}

mirror!(
    Ok,
    Internal,
    InvalidState,
    EndOfMethod,
    AlreadyLoaded,
    NotSupported,
    NotImplemented,
    InvalidArgument,
    InvalidType,
    OperatorMissing,
    RegistrationExceedingMaxKernels,
    RegistrationAlreadyRegistered,
    NotFound,
    MemoryAllocationFailed,
    AccessFailed,
    InvalidProgram,
    InvalidExternalData,
    OutOfResources,
    DelegateInvalidCompatibility,
    DelegateMemoryAllocationFailed,
    DelegateInvalidHandle
);
