//! The protobuf wire format: reading fields out of a buffer and writing them.

use super::error::ProtobufError;

/// A field's value as it sits on the wire.
#[derive(Clone, Copy, Debug)]
pub(super) enum Value<'a> {
    Varint(u64),
    Fixed64(u64),
    /// A 32-bit fixed value: no Kubernetes field has one, so it is only skipped.
    Fixed32,
    Bytes(&'a [u8]),
}

fn malformed(what: &'static str) -> ProtobufError {
    ProtobufError::Malformed(what)
}

fn varint(buf: &[u8], pos: &mut usize) -> Result<u64, ProtobufError> {
    let mut out = 0u64;
    for shift in (0..70).step_by(7) {
        let b = *buf.get(*pos).ok_or(malformed("truncated varint"))?;
        *pos += 1;
        if shift == 63 && b > 1 {
            return Err(malformed("varint overflows 64 bits"));
        }
        out |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(out);
        }
    }
    Err(malformed("varint too long"))
}

fn take<'a>(buf: &'a [u8], pos: &mut usize, n: usize) -> Result<&'a [u8], ProtobufError> {
    let end = pos
        .checked_add(n)
        .filter(|e| *e <= buf.len())
        .ok_or(malformed("truncated field"))?;
    let out = &buf[*pos..end];
    *pos = end;
    Ok(out)
}

/// The fields of a message, in wire order.
pub(super) struct Fields<'a> {
    buf: &'a [u8],
    pos: usize,
}

pub(super) fn fields(buf: &[u8]) -> Fields<'_> {
    Fields { buf, pos: 0 }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, Value<'a>), ProtobufError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.buf.len() {
            return None;
        }
        let item = self.read();
        if item.is_err() {
            // Nothing after a malformed field can be read.
            self.pos = self.buf.len();
        }
        Some(item)
    }
}

impl<'a> Fields<'a> {
    fn read(&mut self) -> Result<(u32, Value<'a>), ProtobufError> {
        let (buf, pos) = (self.buf, &mut self.pos);
        let key = varint(buf, pos)?;
        let tag = u32::try_from(key >> 3)
            .ok()
            .filter(|t| *t != 0)
            .ok_or(malformed("invalid field number"))?;
        let value = match key & 7 {
            0 => Value::Varint(varint(buf, pos)?),
            1 => Value::Fixed64(u64::from_le_bytes(
                take(buf, pos, 8)?.try_into().expect("8 bytes"),
            )),
            2 => {
                let len = usize::try_from(varint(buf, pos)?)
                    .map_err(|_| malformed("length overflows"))?;
                Value::Bytes(take(buf, pos, len)?)
            }
            5 => {
                take(buf, pos, 4)?;
                Value::Fixed32
            }
            _ => return Err(malformed("unsupported wire type")),
        };
        Ok((tag, value))
    }
}

/// The values of a packed repeated number field: varints, or (`fixed64`) 8-byte values.
pub(super) fn packed(
    run: &[u8],
    fixed64: bool,
) -> impl Iterator<Item = Result<u64, ProtobufError>> + '_ {
    let mut pos = 0;
    std::iter::from_fn(move || {
        (pos < run.len()).then(|| {
            let item = if fixed64 {
                take(run, &mut pos, 8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
            } else {
                varint(run, &mut pos)
            };
            if item.is_err() {
                // Nothing after a malformed value can be read.
                pos = run.len();
            }
            item
        })
    })
}

/// Appends protobuf fields to a buffer.
#[derive(Default)]
pub(crate) struct Writer {
    pub buf: Vec<u8>,
}

impl Writer {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }

    fn key(&mut self, tag: u32, wire: u8) {
        self.varint((u64::from(tag) << 3) | u64::from(wire));
    }

    pub fn uint(&mut self, tag: u32, v: u64) {
        self.key(tag, 0);
        self.varint(v);
    }

    pub fn double(&mut self, tag: u32, v: f64) {
        self.key(tag, 1);
        self.buf.extend_from_slice(&v.to_bits().to_le_bytes());
    }

    pub fn bytes(&mut self, tag: u32, v: &[u8]) {
        self.key(tag, 2);
        self.varint(v.len() as u64);
        self.buf.extend_from_slice(v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_overflow_is_refused() {
        for v in [0u64, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            let mut w = Writer::default();
            w.uint(5, v);
            let got: Vec<_> = fields(&w.buf).collect::<Result<_, _>>().unwrap();
            assert!(matches!(got[..], [(5, Value::Varint(x))] if x == v), "{v}");
        }
        // Eleven continuation bytes, and a tenth byte above 1.
        let mut pos = 0;
        assert!(varint(&[0xff; 11], &mut pos).is_err());
        let mut pos = 0;
        let mut ten = vec![0xff; 9];
        ten.push(0x02);
        assert!(varint(&ten, &mut pos).is_err());
    }

    #[test]
    fn packed_runs_are_read_and_a_truncated_one_is_refused() {
        let run = [0x01, 0xac, 0x02, 0xff, 0xff, 0xff, 0xff, 0x0f];
        let got: Vec<u64> = packed(&run, false).collect::<Result<_, _>>().unwrap();
        assert_eq!(got, [1, 300, u64::from(u32::MAX)]);
        assert!(packed(&[0x80], false).any(|v| v.is_err()));
        assert!(packed(&[0; 12], true).any(|v| v.is_err()));
    }

    #[test]
    fn truncated_and_group_fields_are_refused() {
        assert!(fields(&[0x0a, 0x05, 1, 2]).next().unwrap().is_err());
        assert!(fields(&[0x0b]).next().unwrap().is_err());
        assert!(fields(&[0x00, 0x01]).next().unwrap().is_err());
    }
}
