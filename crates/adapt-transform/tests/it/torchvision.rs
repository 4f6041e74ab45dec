//! Each augmentation operation against torchvision's at fixed magnitudes,
//! from `fixtures/torchvision_ops.bin` (written by the script beside it with
//! torchvision 0.29 and Pillow 13 on a 31×23 RGB image).

use adapt_dataset::Sample;
use adapt_transform::{ColorJitter, Interpolation, Op, Scratch, Transform};

const W: u32 = 31;
const H: u32 = 23;
const FIXTURE: &[u8] = include_bytes!("fixtures/torchvision_ops.bin");

struct Case {
    op: String,
    magnitude: f64,
    interpolation: Interpolation,
    expected: Vec<u8>,
}

fn cases() -> (Vec<u8>, Vec<Case>) {
    let split = FIXTURE
        .windows(5)
        .position(|w| w == b"\n---\n")
        .expect("fixture header");
    let header = std::str::from_utf8(&FIXTURE[..split]).expect("header text");
    let mut images = FIXTURE[split + 5..].chunks_exact((W * H * 3) as usize);
    let input = images.next().expect("input image").to_vec();
    let cases = header
        .lines()
        .zip(images)
        .map(|(line, px)| {
            let f: Vec<&str> = line.split(' ').collect();
            Case {
                op: f[0].to_owned(),
                magnitude: f[1].parse().expect("magnitude"),
                interpolation: Interpolation::from_name(f[2]).expect("interpolation"),
                expected: px.to_vec(),
            }
        })
        .collect();
    (input, cases)
}

fn run(case: &Case, input: &[u8]) -> Vec<u8> {
    let mut s = Sample::hwc(input.to_vec(), H, W, 3, 0).expect("sample");
    let mut scratch = Scratch::default();
    if case.op == "Hue" {
        let m = case.magnitude as f32;
        let hue = ColorJitter {
            brightness: None,
            contrast: None,
            saturation: None,
            hue: Some((m, m)),
        };
        hue.apply(&mut s, &mut scratch).expect("hue");
    } else {
        let op = Op::from_name(&case.op).expect("op name");
        op.apply(
            case.magnitude,
            case.interpolation,
            [0; 3],
            &mut s,
            &mut scratch,
        )
        .expect("apply");
    }
    s.pixels
}

/// Every operation equals torchvision's byte for byte: the geometric ones
/// under nearest, bilinear and bicubic sampling, the enhancements on both
/// sides of a factor of 1, the look-up tables, hue through PIL's HSV.
#[test]
fn every_operation_matches_torchvision_on_a_pil_image() {
    let (input, cases) = cases();
    assert_eq!(cases.len(), 59);
    let mut failures = Vec::new();
    for case in &cases {
        let got = run(case, &input);
        let off: Vec<i32> = got
            .iter()
            .zip(&case.expected)
            .map(|(a, b)| (i32::from(*a) - i32::from(*b)).abs())
            .filter(|&d| d > 0)
            .collect();
        if !off.is_empty() {
            failures.push(format!(
                "{} {} {:?}: {} values differ, by up to {}",
                case.op,
                case.magnitude,
                case.interpolation,
                off.len(),
                off.iter().max().unwrap_or(&0)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The fixture is not trivially passed: most operations change the image.
#[test]
fn the_fixture_operations_change_the_image() {
    let (input, cases) = cases();
    let changed = cases.iter().filter(|c| c.expected != input).count();
    assert!(
        changed >= 55,
        "{changed} of {} change the image",
        cases.len()
    );
}
