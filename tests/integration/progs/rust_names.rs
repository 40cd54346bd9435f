// rust_names: a Rust program for test_names.sh, built there with `rustc -g`
// (not by the Makefile).  Its frames must be named as a Rust developer reads
// them: rust_names::store::table::fill fills 200 Vecs (Vec growth:
// alloc::raw_vec::...finish_grow), rust_names::store::build puts their
// lengths in a HashMap under format!()ed keys; main prints 12704.
mod store {
    pub mod table {
        #[inline(never)]
        pub fn fill(n: usize) -> Vec<Vec<u64>> {
            let mut rows = Vec::new();
            for i in 0..n {
                let mut row = Vec::new();
                for j in 0..(i % 7 + 1) * 16 {
                    row.push(j as u64);
                }
                rows.push(row);
            }
            rows
        }
    }

    #[inline(never)]
    pub fn build(n: usize) -> usize {
        let t = table::fill(n);
        let mut s = std::collections::HashMap::new();
        for (i, r) in t.iter().enumerate() {
            s.insert(format!("row{}", i), r.len());
        }
        s.values().sum()
    }
}

fn main() {
    let total = store::build(200);
    println!("{}", total);
}
