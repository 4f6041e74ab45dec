//! Whether a Huffman JPEG's entropy-coded data (sequential or progressive)
//! holds every block its frame declares: the check behind "a JPEG cut
//! short and closed with an end marker is an error", which the decoder
//! cannot make (zune-jpeg fills the missing blocks from zero bits and
//! reports success; libjpeg warns "premature end of data segment").
//!
//! The scans are Huffman-decoded without dequantising or transforming
//! anything: each block's codes are read and its coefficient bits skipped,
//! restart intervals are followed, and a scan that needs bits past the
//! marker ending its data is short. Progressive frames are followed scan
//! by scan (DC first and refining, AC bands first and refining with the
//! coefficients each block has made nonzero, end-of-band runs), so a cut
//! inside any scan is found; one that falls between two scans leaves a
//! valid, coarser image and is not. Lossless and arithmetic frames, a
//! height given later (DNL) and anything this reading does not follow are
//! left unchecked ([`Scan::Unchecked`]), never called short.

/// What the check found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scan {
    /// Every component's scan holds all its blocks.
    Complete,
    /// The data ends early: `blocks` of the `expected` blocks of the scan
    /// that ran out (or of a component that has no scan at all) are there.
    Short { blocks: u64, expected: u64 },
    /// A marker segment (a table, a scan header) runs past the end.
    CutSegment,
    /// Not a frame this check reads, or data it does not follow.
    Unchecked,
}

/// Largest number of components a frame has.
const MAX_COMPONENTS: usize = 4;

/// Bits the fast Huffman lookup resolves at once.
const LOOKAHEAD: u32 = 10;

/// What one code means to a reader that skips coefficients: its length,
/// and its symbol's run of zeros (AC) and coefficient size, whose bits
/// follow the code. A `code_len` of 0 marks a code longer than the
/// lookahead.
#[derive(Clone, Copy)]
struct Code {
    code_len: u8,
    run: u8,
    size: u8,
}

impl Code {
    const LONGER: Self = Self {
        code_len: 0,
        run: 0,
        size: 0,
    };

    /// The bits the code and its coefficient take (at most 16 + 16).
    fn bits(self) -> u32 {
        u32::from(self.code_len) + u32::from(self.size)
    }

    /// The code of `len` bits for `symbol` in a DC (`ac` false) or AC
    /// table; `None` for a coefficient size no JPEG has.
    fn of(len: u32, symbol: u8, ac: bool) -> Option<Self> {
        let (run, size) = if ac {
            (symbol >> 4, symbol & 15)
        } else {
            (0, symbol)
        };
        if size > 16 {
            return None;
        }
        Some(Self {
            code_len: len as u8,
            run,
            size,
        })
    }
}

/// A Huffman table as a coefficient-skipping reader needs it (JPEG Annex
/// F.2.2.3), held inline so a check allocates nothing.
struct Huffman {
    ac: bool,
    /// The code at every `LOOKAHEAD`-bit prefix.
    fast: [Code; 1 << LOOKAHEAD],
    /// The largest code of each length (1..=16), -1 where none.
    max_code: [i32; 17],
    /// `symbols` index minus the first code, per length.
    offset: [i32; 17],
    symbols: [u8; 256],
}

impl Huffman {
    const EMPTY: Self = Self {
        ac: false,
        fast: [Code::LONGER; 1 << LOOKAHEAD],
        max_code: [-1; 17],
        offset: [0; 17],
        symbols: [0; 256],
    };

    /// Sets the table from a DHT segment's 16 counts and symbols; `None`
    /// when the counts over-fill the code space or a size is impossible.
    fn set(&mut self, counts: &[u8; 16], symbols: &[u8], ac: bool) -> Option<()> {
        *self = Self::EMPTY;
        self.ac = ac;
        self.symbols
            .get_mut(..symbols.len())?
            .copy_from_slice(symbols);
        let (mut code, mut k) = (0u32, 0usize);
        for len in 1..=16u32 {
            let n = usize::from(counts[len as usize - 1]);
            self.offset[len as usize] = k as i32 - code as i32;
            for _ in 0..n {
                if code >= 1 << len {
                    return None;
                }
                let meaning = Code::of(len, symbols[k], ac)?;
                if len <= LOOKAHEAD {
                    let shift = LOOKAHEAD - len;
                    let first = (code << shift) as usize;
                    self.fast[first..first + (1 << shift)].fill(meaning);
                }
                code += 1;
                k += 1;
            }
            if n > 0 {
                self.max_code[len as usize] = code as i32 - 1;
            }
            code <<= 1;
        }
        Some(())
    }

    /// The code longer than the lookahead at the top of `buffer`; `None`
    /// when the table has none there.
    fn long(&self, buffer: u64) -> Option<Code> {
        let top = (buffer >> 48) as i32;
        let len = (LOOKAHEAD + 1..=16).find(|&l| (top >> (16 - l)) <= self.max_code[l as usize])?;
        let at = self.offset[len as usize] + (top >> (16 - len));
        Code::of(len, *self.symbols.get(usize::try_from(at).ok()?)?, self.ac)
    }
}

/// The entropy-coded bits of one scan, read up to the marker ending them.
struct Bits<'a> {
    data: &'a [u8],
    /// The next byte to read.
    at: usize,
    /// The bits read, from the top; below `count` it is zero fill.
    buffer: u64,
    count: u32,
    /// The marker ending the data was met; `at` is at its `FF`.
    at_marker: bool,
}

impl<'a> Bits<'a> {
    fn new(data: &'a [u8], at: usize) -> Self {
        Self {
            data,
            at,
            buffer: 0,
            count: 0,
            at_marker: false,
        }
    }

    /// Fills the buffer past 32 bits, or up to the marker: four bytes at
    /// once where none of them is `FF`.
    #[inline]
    fn fill(&mut self) {
        while self.count <= 32 && !self.at_marker {
            if let Some(&[a, b, c, d]) = self.data.get(self.at..self.at + 4) {
                let word = u32::from_be_bytes([a, b, c, d]);
                let inverted = !word;
                let has_ff = inverted.wrapping_sub(0x0101_0101) & !inverted & 0x8080_8080 != 0;
                if !has_ff {
                    self.buffer |= u64::from(word) << (32 - self.count);
                    self.count += 32;
                    self.at += 4;
                    continue;
                }
            }
            self.fill_byte();
        }
    }

    /// Reads one byte, unstuffing `FF 00`; at any other `FF`, the marker.
    fn fill_byte(&mut self) {
        let Some(&byte) = self.data.get(self.at) else {
            self.at_marker = true;
            return;
        };
        if byte == 0xFF {
            if self.data.get(self.at + 1) != Some(&0) {
                self.at_marker = true;
                return;
            }
            self.at += 2;
        } else {
            self.at += 1;
        }
        self.buffer |= u64::from(byte) << (56 - self.count);
        self.count += 8;
    }

    /// Reads `n` (0..=16) bits as a number; `None` past the marker.
    #[inline]
    fn take(&mut self, n: u32) -> Option<u32> {
        if n == 0 {
            return Some(0);
        }
        if self.count < n {
            self.fill();
            if self.count < n {
                return None;
            }
        }
        let value = (self.buffer >> (64 - n)) as u32;
        self.buffer <<= n;
        self.count -= n;
        Some(value)
    }

    /// Reads one code and skips its coefficient's bits: `Err(true)` when
    /// they run past the marker, `Err(false)` for a code the table lacks.
    #[inline]
    fn code(&mut self, table: &Huffman) -> Result<Code, bool> {
        if self.count <= 32 {
            self.fill();
        }
        let mut code = table.fast[(self.buffer >> (64 - LOOKAHEAD)) as usize];
        if code.code_len == 0 {
            code = table
                .long(self.buffer)
                .ok_or(self.at_marker && self.count < 16)?;
        }
        let total = code.bits();
        if total > self.count {
            return Err(true);
        }
        self.buffer <<= total;
        self.count -= total;
        Ok(code)
    }

    /// After a restart interval: the rest of the byte is padding and a
    /// restart marker follows; it is passed. False otherwise.
    fn restart(&mut self) -> bool {
        if self.count >= 8 {
            return false;
        }
        self.fill();
        if !self.at_marker || self.count >= 8 {
            return false;
        }
        let mut at = self.at;
        while self.data.get(at) == Some(&0xFF) {
            at += 1;
        }
        if !matches!(self.data.get(at), Some(0xD0..=0xD7)) {
            return false;
        }
        *self = Self::new(self.data, at + 1);
        true
    }
}

/// One frame component: its sampling factors.
#[derive(Clone, Copy, Default)]
struct Component {
    id: u8,
    h: u32,
    v: u32,
}

/// What the markers before a scan set (inline: a check allocates nothing).
struct Frame {
    width: u32,
    height: u32,
    slots: [Component; MAX_COMPONENTS],
    count: usize,
    /// DC tables 0..4 then AC tables 0..4, and which are defined.
    tables: [Huffman; 8],
    defined: [bool; 8],
    restart: u32,
    /// Which components a scan has covered (a sequential scan, or a
    /// progressive frame's first DC scan).
    scanned: [bool; MAX_COMPONENTS],
    /// A progressive frame (SOF2), and per component which coefficients
    /// of each block its AC scans have made nonzero.
    progressive: bool,
    history: [Vec<u64>; MAX_COMPONENTS],
}

impl Frame {
    fn new() -> Self {
        Self {
            width: 0,
            height: 0,
            slots: [Component::default(); MAX_COMPONENTS],
            count: 0,
            tables: [const { Huffman::EMPTY }; 8],
            defined: [false; 8],
            restart: 0,
            scanned: [false; MAX_COMPONENTS],
            progressive: false,
            history: Default::default(),
        }
    }

    fn components(&self) -> &[Component] {
        &self.slots[..self.count]
    }

    fn table(&self, i: usize) -> Option<&Huffman> {
        self.defined[i].then(|| &self.tables[i])
    }
}

/// Checks `bytes` (a JPEG stream) as the module says.
pub(crate) fn check(bytes: &[u8]) -> Scan {
    check_frame(bytes).unwrap_or(Scan::Unchecked)
}

/// The markers in order; `None` where the stream is not one this reads.
fn check_frame(bytes: &[u8]) -> Option<Scan> {
    if bytes.get(..2)? != [0xFF, 0xD8] {
        return None;
    }
    let mut frame = Frame::new();
    let mut at = 2;
    loop {
        while bytes.get(at) == Some(&0xFF) && bytes.get(at + 1) == Some(&0xFF) {
            at += 1;
        }
        if *bytes.get(at)? != 0xFF {
            return None;
        }
        let marker = *bytes.get(at + 1)?;
        if marker == 0xD9 {
            return Some(unscanned(&frame).unwrap_or(Scan::Complete));
        }
        let len = usize::from(u16::from_be_bytes([
            *bytes.get(at + 2)?,
            *bytes.get(at + 3)?,
        ]));
        let end = (at + 2).checked_add(len)?;
        if end > bytes.len() {
            return Some(Scan::CutSegment);
        }
        let body = bytes.get(at + 4..end)?;
        match marker {
            0xC0 | 0xC1 => frame_header(&mut frame, body, false)?,
            0xC2 => frame_header(&mut frame, body, true)?,
            0xC3 | 0xC5..=0xC7 | 0xC9..=0xCB | 0xCD..=0xCF => return None,
            0xC4 => huffman_tables(&mut frame, body)?,
            0xDD => frame.restart = u32::from(u16::from_be_bytes([*body.first()?, *body.get(1)?])),
            0xDA => {
                let (end, scan) = scan(&mut frame, bytes, body, at + 2 + len)?;
                if scan != Scan::Complete {
                    return Some(scan);
                }
                at = end;
                continue;
            }
            _ => {}
        }
        at += 2 + len;
    }
}

/// A frame component without a scan, as a short scan of none of its
/// blocks (a baseline JPEG scans every component).
fn unscanned(frame: &Frame) -> Option<Scan> {
    let i = (0..frame.count).find(|&i| !frame.scanned[i])?;
    Some(Scan::Short {
        blocks: 0,
        expected: component_blocks(frame, i),
    })
}

/// SOF0 / SOF1 / SOF2: the size and the components' sampling factors.
/// A progressive frame beyond the decode limits is left to the decoder
/// (its coefficient history would size an allocation).
fn frame_header(frame: &mut Frame, body: &[u8], progressive: bool) -> Option<()> {
    let height = u32::from(u16::from_be_bytes([*body.get(1)?, *body.get(2)?]));
    let width = u32::from(u16::from_be_bytes([*body.get(3)?, *body.get(4)?]));
    let n = usize::from(*body.get(5)?);
    if height == 0 || width == 0 || n == 0 || n > MAX_COMPONENTS || frame.count != 0 {
        return None;
    }
    for c in body.get(6..6 + 3 * n)?.chunks_exact(3) {
        let (h, v) = (u32::from(c[1] >> 4), u32::from(c[1] & 15));
        if !(1..=4).contains(&h) || !(1..=4).contains(&v) {
            return None;
        }
        frame.slots[frame.count] = Component { id: c[0], h, v };
        frame.count += 1;
    }
    let max_side = crate::decode_limits().max_side;
    if progressive && (width > max_side || height > max_side) {
        return None;
    }
    (frame.width, frame.height, frame.progressive) = (width, height, progressive);
    Some(())
}

/// DHT: one or more tables.
fn huffman_tables(frame: &mut Frame, mut body: &[u8]) -> Option<()> {
    while let Some(&class_id) = body.first() {
        let counts: [u8; 16] = body.get(1..17)?.try_into().ok()?;
        let n: usize = counts.iter().map(|&c| usize::from(c)).sum();
        let symbols = body.get(17..17 + n)?;
        let (class, id) = (usize::from(class_id >> 4), usize::from(class_id & 15));
        if class > 1 || id > 3 {
            return None;
        }
        frame.tables[class * 4 + id].set(&counts, symbols, class == 1)?;
        frame.defined[class * 4 + id] = true;
        body = &body[17 + n..];
    }
    Some(())
}

/// The blocks of component `i` alone (a non-interleaved scan's units).
fn component_blocks(frame: &Frame, i: usize) -> u64 {
    let (w, h) = component_block_dims(frame, i);
    u64::from(w) * u64::from(h)
}

/// Component `i`'s size in blocks.
fn component_block_dims(frame: &Frame, i: usize) -> (u32, u32) {
    let c = frame.components()[i];
    let hmax = frame.components().iter().map(|c| c.h).max().unwrap_or(1);
    let vmax = frame.components().iter().map(|c| c.v).max().unwrap_or(1);
    let w = (frame.width * c.h).div_ceil(hmax);
    let h = (frame.height * c.v).div_ceil(vmax);
    (w.div_ceil(8), h.div_ceil(8))
}

/// What one scan codes of each block.
#[derive(Clone, Copy)]
enum Pass {
    /// Sequential: all 64 coefficients.
    Sequential,
    /// Progressive DC: its first bits (Huffman-coded sizes), or one more.
    DcFirst,
    DcRefine,
    /// Progressive AC band `start..=end` of one component: first bits, or
    /// one more bit of each coefficient already nonzero.
    AcFirst {
        start: u32,
        end: u32,
    },
    AcRefine {
        start: u32,
        end: u32,
    },
}

/// A scan's header read: its components as (index, DC table, AC table,
/// blocks per unit), how many there are, its units and what it codes.
struct Plan {
    members: [(usize, usize, usize, u32); MAX_COMPONENTS],
    n: usize,
    units: u64,
    pass: Pass,
}

/// The SOS header `header` against the frame; `None` where it is not one
/// this check follows.
fn plan(frame: &mut Frame, header: &[u8]) -> Option<Plan> {
    let n = usize::from(*header.first()?);
    if n == 0 || n > MAX_COMPONENTS || frame.count == 0 {
        return None;
    }
    let mut members = [(0, 0, 0, 0); MAX_COMPONENTS];
    for (member, s) in members
        .iter_mut()
        .zip(header.get(1..1 + 2 * n)?.chunks_exact(2))
    {
        let i = frame.components().iter().position(|c| c.id == s[0])?;
        let (dc, ac) = (usize::from(s[1] >> 4), usize::from(s[1] & 15));
        if dc > 3 || ac > 3 {
            return None;
        }
        let c = frame.components()[i];
        *member = (i, dc, 4 + ac, if n == 1 { 1 } else { c.h * c.v });
    }
    let &[start, end, approximation] = header.get(1 + 2 * n..4 + 2 * n)? else {
        return None;
    };
    let (start, end, refine) = (u32::from(start), u32::from(end), approximation >> 4 != 0);
    let pass = match (frame.progressive, start) {
        (false, _) => Pass::Sequential,
        (true, 0) if end == 0 && refine => Pass::DcRefine,
        (true, 0) if end == 0 => Pass::DcFirst,
        (true, 1..=63) if n == 1 && (start..=63).contains(&end) && refine => {
            Pass::AcRefine { start, end }
        }
        (true, 1..=63) if n == 1 && (start..=63).contains(&end) => Pass::AcFirst { start, end },
        _ => return None,
    };
    if matches!(pass, Pass::Sequential | Pass::DcFirst) {
        for m in &members[..n] {
            frame.scanned[m.0] = true;
        }
    }
    let units = if n == 1 {
        component_blocks(frame, members[0].0)
    } else {
        let hmax = frame.components().iter().map(|c| c.h).max()?;
        let vmax = frame.components().iter().map(|c| c.v).max()?;
        u64::from(frame.width.div_ceil(8 * hmax)) * u64::from(frame.height.div_ceil(8 * vmax))
    };
    Some(Plan {
        members,
        n,
        units,
        pass,
    })
}

/// SOS and its data, from `data_at`: where the data's marker is and what
/// was found.
fn scan(frame: &mut Frame, bytes: &[u8], header: &[u8], data_at: usize) -> Option<(usize, Scan)> {
    let plan = plan(frame, header)?;
    let members = &plan.members[..plan.n];
    let per_unit: u64 = members.iter().map(|m| u64::from(m.3)).sum();
    let expected = plan.units * per_unit;
    // A progressive AC scan's component: which coefficients are nonzero.
    let mut history = Vec::new();
    if let Pass::AcFirst { .. } | Pass::AcRefine { .. } = plan.pass {
        history = std::mem::take(&mut frame.history[members[0].0]);
        history.resize(usize::try_from(plan.units).ok()?, 0);
    }
    let mut bits = Bits::new(bytes, data_at);
    let mut end_of_bands = 0u32;
    for unit in 0..plan.units {
        if frame.restart > 0 && unit > 0 && unit % u64::from(frame.restart) == 0 {
            if !bits.restart() {
                return short_or_unchecked(&bits, unit * per_unit, expected);
            }
            end_of_bands = 0;
        }
        for &(_, dc, ac, blocks) in members {
            for _ in 0..blocks {
                let done = match plan.pass {
                    Pass::Sequential => block(&mut bits, frame.table(dc)?, frame.table(ac)?),
                    Pass::DcFirst => bits.code(frame.table(dc)?).map(drop),
                    Pass::DcRefine => bits.take(1).map(drop).ok_or(true),
                    Pass::AcFirst { start, end } | Pass::AcRefine { start, end } => {
                        let band = if matches!(plan.pass, Pass::AcRefine { .. }) {
                            ac_refine
                        } else {
                            ac_first
                        };
                        let nonzero = &mut history[unit as usize];
                        let table = frame.table(ac)?;
                        band(&mut bits, table, (start, end), &mut end_of_bands, nonzero)
                    }
                };
                match done {
                    Ok(()) => {}
                    Err(true) => return Some((0, short(unit * per_unit, expected))),
                    Err(false) => return None,
                }
            }
        }
    }
    if !history.is_empty() {
        frame.history[members[0].0] = history;
    }
    Some((next_marker(bytes, bits.at)?, Scan::Complete))
}

/// A progressive AC scan's first bits of one block's band (JPEG G.1.2.2):
/// `end_of_bands` is the run of blocks left without coefficients in it;
/// `nonzero` marks the coefficients coded nonzero.
fn ac_first(
    bits: &mut Bits<'_>,
    table: &Huffman,
    (start, end): (u32, u32),
    end_of_bands: &mut u32,
    nonzero: &mut u64,
) -> Result<(), bool> {
    if *end_of_bands > 0 {
        *end_of_bands -= 1;
        return Ok(());
    }
    let mut k = start;
    while k <= end {
        let code = bits.code(table)?;
        let run = u32::from(code.run);
        if code.size != 0 {
            k += run;
            if k < 64 {
                *nonzero |= 1 << k;
            }
        } else if run == 15 {
            k += 15;
        } else {
            *end_of_bands = (1 << run) + bits.take(run).ok_or(true)? - 1;
            break;
        }
        k += 1;
    }
    Ok(())
}

/// A progressive AC scan's next bit of one block's band (JPEG G.1.2.3):
/// a correction bit for each coefficient already nonzero, new ones (of
/// size 1) placed after their run of still-zero ones.
fn ac_refine(
    bits: &mut Bits<'_>,
    table: &Huffman,
    (start, end): (u32, u32),
    end_of_bands: &mut u32,
    nonzero: &mut u64,
) -> Result<(), bool> {
    let mut k = start;
    let is_nonzero = |mask: u64, k: u32| mask >> k & 1 == 1;
    if *end_of_bands == 0 {
        while k <= end {
            let code = bits.code(table)?;
            let (mut run, new) = (i32::from(code.run), code.size != 0);
            if code.size > 1 {
                return Err(false);
            }
            if !new && run != 15 {
                *end_of_bands = (1 << run) + bits.take(run as u32).ok_or(true)?;
                break;
            }
            while k <= end {
                if is_nonzero(*nonzero, k) {
                    bits.take(1).ok_or(true)?;
                } else {
                    run -= 1;
                    if run < 0 {
                        break;
                    }
                }
                k += 1;
            }
            if new {
                if k > end {
                    return Err(false);
                }
                *nonzero |= 1 << k;
            }
            k += 1;
        }
    }
    if *end_of_bands > 0 {
        while k <= end {
            if is_nonzero(*nonzero, k) {
                bits.take(1).ok_or(true)?;
            }
            k += 1;
        }
        *end_of_bands -= 1;
    }
    Ok(())
}

/// Where the first marker at or after `at` is, past any padding and
/// restart markers that end a scan's data.
fn next_marker(bytes: &[u8], at: usize) -> Option<usize> {
    let rest = bytes.get(at..)?;
    let p = rest
        .windows(2)
        .position(|w| w[0] == 0xFF && !matches!(w[1], 0x00 | 0xFF | 0xD0..=0xD7))?;
    Some(at + p)
}

/// At a restart boundary without its marker: short when the data has
/// ended (another marker is next), else data this check does not follow.
fn short_or_unchecked(bits: &Bits<'_>, blocks: u64, expected: u64) -> Option<(usize, Scan)> {
    let next = bits.data.get(bits.at + 1).copied();
    if bits.at_marker && !matches!(next, Some(0xD0..=0xD7)) {
        Some((0, short(blocks, expected)))
    } else {
        None
    }
}

fn short(blocks: u64, expected: u64) -> Scan {
    Scan::Short { blocks, expected }
}

/// One block's DC and AC codes, their coefficient bits skipped:
/// `Err(true)` past the marker, `Err(false)` on a code the table lacks.
#[inline]
fn block(bits: &mut Bits<'_>, dc: &Huffman, ac: &Huffman) -> Result<(), bool> {
    bits.code(dc)?;
    let mut k = 1;
    while k < 64 {
        let code = bits.code(ac)?;
        match (code.run, code.size) {
            (15, 0) => k += 16,
            (_, 0) => break,
            (run, _) => k += u32::from(run) + 1,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A smooth-ish test image as a JPEG of the given subsampling.
    fn jpeg(width: u32, height: u32, gray: bool) -> Vec<u8> {
        let channels = if gray { 1 } else { 3 };
        let pixels: Vec<u8> = (0..width * height * channels)
            .map(|i| ((i * 7) % 251) as u8 ^ ((i / 97) as u8))
            .collect();
        let mut out = Vec::new();
        let color = if gray {
            image::ExtendedColorType::L8
        } else {
            image::ExtendedColorType::Rgb8
        };
        image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 90)
            .encode(&pixels, width, height, color)
            .unwrap();
        out
    }

    /// `bytes` cut at `fraction` of their scan data and closed with EOI.
    fn cut(bytes: &[u8], fraction: f64) -> Vec<u8> {
        let sos = bytes.windows(2).position(|w| w == [0xFF, 0xDA]).unwrap();
        let at = sos + ((bytes.len() - sos) as f64 * fraction) as usize;
        let mut out = bytes[..at].to_vec();
        out.extend([0xFF, 0xD9]);
        out
    }

    #[test]
    fn a_whole_jpeg_is_complete_and_a_cut_one_short() {
        for (w, h, gray) in [
            (64, 48, false),
            (33, 17, false),
            (40, 40, true),
            (9, 300, false),
        ] {
            let whole = jpeg(w, h, gray);
            assert_eq!(check(&whole), Scan::Complete, "{w}x{h} gray={gray}");
            for fraction in [0.3, 0.6, 0.9] {
                match check(&cut(&whole, fraction)) {
                    Scan::Short { blocks, expected } => assert!(blocks < expected),
                    other => panic!("{w}x{h} cut to {fraction}: {other:?}"),
                }
            }
        }
    }

    #[test]
    fn what_it_does_not_read_is_unchecked_not_short() {
        assert_eq!(check(b"not a jpeg"), Scan::Unchecked);
        let mut progressive = jpeg(16, 16, false);
        // SOF0 turned into SOF2: a progressive frame whose scan codes all
        // 64 coefficients at once, which no progressive scan does.
        let sof = progressive
            .windows(2)
            .position(|w| w == [0xFF, 0xC0])
            .unwrap();
        progressive[sof + 1] = 0xC2;
        assert_eq!(check(&progressive), Scan::Unchecked);
        // Headers alone, no scan: the component has no data.
        let whole = jpeg(16, 16, true);
        let sos = whole.windows(2).position(|w| w == [0xFF, 0xDA]).unwrap();
        let mut headers = whole[..sos].to_vec();
        headers.extend([0xFF, 0xD9]);
        assert!(matches!(check(&headers), Scan::Short { blocks: 0, .. }));
        // Cut inside a table's segment, then an end marker.
        let dht = whole.windows(2).position(|w| w == [0xFF, 0xC4]).unwrap();
        let cut_table = [&whole[..dht + 10], &[0xFF, 0xD9][..]].concat();
        assert_eq!(check(&cut_table), Scan::CutSegment);
    }

    #[test]
    fn a_second_frame_header_is_unchecked_not_a_panic() {
        let whole = jpeg(16, 16, false);
        let sof = whole.windows(2).position(|w| w == [0xFF, 0xC0]).unwrap();
        let len = usize::from(u16::from_be_bytes([whole[sof + 2], whole[sof + 3]]));
        let segment = &whole[sof..sof + 2 + len];
        let twice = [&whole[..sof], segment, &whole[sof..]].concat();
        assert_eq!(check(&twice), Scan::Unchecked);
    }

    #[test]
    fn garbage_after_the_headers_never_panics() {
        let whole = jpeg(24, 24, false);
        let sos = whole.windows(2).position(|w| w == [0xFF, 0xDA]).unwrap();
        for seed in 0..200u32 {
            let mut b = whole.clone();
            for k in 0..8 {
                let at = sos + ((seed * 31 + k * 17) as usize % (b.len() - sos));
                b[at] = (seed * 13 + k) as u8;
            }
            let _ = check(&b);
            let _ = check(&b[..b.len() / 2]);
        }
    }
}
