//! `program::load` (decode + validate) on arbitrary bytes: it must never panic, and every
//! failure must carry `DelegateInvalidCompatibility` or `InvalidProgram`. What loads must also
//! dump and re-encode to a blob that loads to the same program.
#![no_main]

use libfuzzer_sys::fuzz_target;
use webdelegate::ErrorCode;
use webdelegate::program::{dump, encode, load};

fuzz_target!(|blob: &[u8]| {
    match load(blob) {
        Ok(program) => {
            let _ = dump(&program);
            let again = encode(&program).expect("a loaded program encodes");
            assert_eq!(load(&again).expect("and loads again"), program);
        }
        Err(error) => assert!(
            matches!(
                error.code(),
                ErrorCode::InvalidProgram | ErrorCode::DelegateInvalidCompatibility
            ),
            "unexpected code {error}"
        ),
    }
});
