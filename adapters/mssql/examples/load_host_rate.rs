//! Host-side cost of the two staging load paths, without a server: decoding a binary COPY
//! artifact and fitting every value ([`ColumnFit`]), then either building bulk-load rows
//! (`TokenRow`) or insert-path batches (statement text and bound parameters, [`InsertBatch`]).
//! Neither the TDS encoding nor the network nor the server's work is measured.
//!
//! `cargo run -p dpone-adapter-mssql --example load_host_rate [ROWS]`

#![allow(clippy::print_stdout)] // the report is the output

use dpone_adapter_mssql::shape::{ColumnRow, LoadPath};
use dpone_adapter_mssql::stage::{ColumnFit, InsertBatch, TupleReader};
use dpone_engine_xmin::artifact::ArtifactReceipt;
use dpone_engine_xmin::copy_binary::encode_for_tests;
use dpone_engine_xmin::envelope::{ARTIFACT_FORMAT, PayloadReceipt, SourceColumn};
use sha2::{Digest, Sha256};
use std::io::Cursor;
use std::time::Instant;
use tiberius::TokenRow;

fn source(name: &str, type_sql: &str, type_oid: u32) -> SourceColumn {
    SourceColumn {
        name: name.into(),
        type_sql: type_sql.into(),
        type_oid,
    }
}

fn target(name: &str, ty: &str, max_length: i32, precision: u8, scale: u8) -> ColumnRow {
    ColumnRow {
        name: name.into(),
        type_name: ty.into(),
        is_nullable: true,
        collation_name: None,
        is_computed: false,
        is_persisted: false,
        max_length,
        precision,
        scale,
        code_page: None,
    }
}

fn main() {
    let rows: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200_000);
    // A typical table: bigint key, nvarchar(50), decimal(18,2), datetime2(7), bit.
    let sources = [
        source("id", "bigint", 20),
        source("name", "text", 25),
        source("amount", "numeric", 1700),
        source("at", "timestamp without time zone", 1114),
        source("ok", "boolean", 16),
    ];
    let targets = [
        target("id", "bigint", 8, 19, 0),
        target("name", "nvarchar", 100, 0, 0),
        target("amount", "decimal", 9, 18, 2),
        target("at", "datetime2", 8, 27, 7),
        target("ok", "bit", 1, 1, 0),
    ];
    let names: Vec<&str> = targets.iter().map(|t| t.name.as_str()).collect();
    let ids: Vec<[u8; 8]> = (0..rows as i64).map(i64::to_be_bytes).collect();
    let name = b"customer name 0123456789".to_vec();
    // numeric 12345.67: ndigits 3, weight 1, sign +, dscale 2, digits 1 2345 6700.
    let amount: Vec<u8> = [3i16, 1, 0, 2, 1, 2345, 6700]
        .iter()
        .flat_map(|v| v.to_be_bytes())
        .collect();
    let at = 762_525_296_789_012i64.to_be_bytes();
    let ok = [1u8];
    let tuples: Vec<Vec<Option<&[u8]>>> = ids
        .iter()
        .map(|id| {
            vec![
                Some(&id[..]),
                Some(&name[..]),
                Some(&amount[..]),
                Some(&at[..]),
                Some(&ok[..]),
            ]
        })
        .collect();
    let bytes = encode_for_tests(&tuples);
    let receipt = PayloadReceipt {
        artifact: ArtifactReceipt {
            sha256: hex::encode(Sha256::digest(&bytes)),
            bytes: bytes.len() as u64,
        },
        format: ARTIFACT_FORMAT.into(),
        rows: rows as u64,
        fields: 5,
        complete: true,
    };
    let plan = |path| -> Vec<ColumnFit> {
        sources
            .iter()
            .zip(&targets)
            .map(|(s, t)| ColumnFit::for_path(s, t, path).expect("fits"))
            .collect()
    };

    let bulk = plan(LoadPath::Bulk);
    let start = Instant::now();
    let mut reader = TupleReader::new(Cursor::new(bytes.clone()), &receipt, 1).expect("header");
    let mut sent = 0usize;
    while let Some(t) = reader.next_tuple().expect("tuple") {
        let mut row = TokenRow::with_capacity(bulk.len());
        for (i, fit) in bulk.iter().enumerate() {
            row.push(fit.convert(t.field(i)).expect("value"));
        }
        sent += row.len();
    }
    let bulk_s = start.elapsed().as_secs_f64();

    let insert = plan(LoadPath::Insert);
    let start = Instant::now();
    let mut reader = TupleReader::new(Cursor::new(bytes), &receipt, 1).expect("header");
    let mut batch = InsertBatch::default();
    let (mut statements, mut params) = (0usize, 0usize);
    while let Some(t) = reader.next_tuple().expect("tuple") {
        batch.push(&t, &insert).expect("value");
        if batch.full(insert.len()) {
            params += batch.take_query("[s].[t]", &names).param_count();
            statements += 1;
        }
    }
    if batch.rows > 0 {
        params += batch.take_query("[s].[t]", &names).param_count();
        statements += 1;
    }
    let insert_s = start.elapsed().as_secs_f64();
    assert_eq!(sent, params);
    println!(
        "rows {rows}, 5 columns; bulk rows built: {:.0} rows/s; insert batches built \
         ({statements} statements of up to {} rows): {:.0} rows/s",
        rows as f64 / bulk_s,
        dpone_adapter_mssql::sql::insert_batch_rows(5),
        rows as f64 / insert_s,
    );
}
