//! Synthetic `cifar-10-python.tar.gz` files in the real layout, for the CIFAR tests and the
//! fuzzer.

/// One CIFAR batch as Python 2's cPickle wrote the real files (protocol 2, byte strings as
/// `SHORT_BINSTRING`/`BINSTRING`, numpy's `_reconstruct` with the pixels as a byte string),
/// written here opcode by opcode.
pub fn py2_batch(images: &[u8], labels: &[u8]) -> Vec<u8> {
    fn short(p: &mut Vec<u8>, s: &[u8]) {
        p.push(b'U');
        p.push(s.len() as u8);
        p.extend(s);
    }
    fn int(p: &mut Vec<u8>, v: i32) {
        p.push(b'J');
        p.extend(v.to_le_bytes());
    }
    let mut p = b"\x80\x02}q\x01(".to_vec();
    short(&mut p, b"batch_label");
    short(&mut p, b"training batch 1 of 5");
    short(&mut p, b"data");
    p.extend(b"cnumpy.core.multiarray\n_reconstruct\nq\x03cnumpy\nndarray\nq\x04K\x00\x85");
    short(&mut p, b"b");
    p.extend(b"\x87Rq\x05(K\x01");
    int(&mut p, (images.len() / 3072) as i32);
    int(&mut p, 3072);
    p.extend(b"\x86cnumpy\ndtype\nq\x06");
    short(&mut p, b"u1");
    p.extend(b"K\x00K\x01\x87Rq\x07(K\x03");
    short(&mut p, b"|");
    p.extend(b"NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb\x89T");
    p.extend((images.len() as u32).to_le_bytes());
    p.extend(images);
    p.extend(b"tb");
    short(&mut p, b"labels");
    p.extend(b"]q\x08(");
    for &l in labels {
        p.extend([b'K', l]);
    }
    p.extend(b"eu.");
    p
}

pub fn archive(members: &[(&str, Vec<u8>)]) -> Vec<u8> {
    archive_with(members, flate2::Compression::fast())
}

/// `archive` at a chosen compression (`none()` leaves the members' bytes in stored blocks,
/// where a fuzzer's mutations reach the pickles).
pub fn archive_with(members: &[(&str, Vec<u8>)], level: flate2::Compression) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), level);
    let mut tar = tar::Builder::new(gz);
    for (name, data) in members {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        tar.append_data(&mut header, format!("cifar-10-batches-py/{name}"), &data[..]).unwrap();
    }
    tar.into_inner().unwrap().finish().unwrap()
}

/// Image `k`'s pixel `p` is `(31 k + p) mod 256`.
pub fn pixels(first: usize, n: usize) -> Vec<u8> {
    (first..first + n).flat_map(|k| (0..3072).map(move |p| ((31 * k + p) % 256) as u8)).collect()
}
