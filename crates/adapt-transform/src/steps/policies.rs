//! AutoAugment's learned sub-policies, as torchvision lists them (op,
//! probability, magnitude bin of 10).

use super::ops::Op;

type Step = (Op, f64, Option<u32>);

/// The imagenet policy.
pub(super) static IMAGENET: [[Step; 2]; 25] = [
    [(Op::Posterize, 0.4, Some(8)), (Op::Rotate, 0.6, Some(9))],
    [(Op::Solarize, 0.6, Some(5)), (Op::AutoContrast, 0.6, None)],
    [(Op::Equalize, 0.8, None), (Op::Equalize, 0.6, None)],
    [(Op::Posterize, 0.6, Some(7)), (Op::Posterize, 0.6, Some(6))],
    [(Op::Equalize, 0.4, None), (Op::Solarize, 0.2, Some(4))],
    [(Op::Equalize, 0.4, None), (Op::Rotate, 0.8, Some(8))],
    [(Op::Solarize, 0.6, Some(3)), (Op::Equalize, 0.6, None)],
    [(Op::Posterize, 0.8, Some(5)), (Op::Equalize, 1.0, None)],
    [(Op::Rotate, 0.2, Some(3)), (Op::Solarize, 0.6, Some(8))],
    [(Op::Equalize, 0.6, None), (Op::Posterize, 0.4, Some(6))],
    [(Op::Rotate, 0.8, Some(8)), (Op::Color, 0.4, Some(0))],
    [(Op::Rotate, 0.4, Some(9)), (Op::Equalize, 0.6, None)],
    [(Op::Equalize, 0.0, None), (Op::Equalize, 0.8, None)],
    [(Op::Invert, 0.6, None), (Op::Equalize, 1.0, None)],
    [(Op::Color, 0.6, Some(4)), (Op::Contrast, 1.0, Some(8))],
    [(Op::Rotate, 0.8, Some(8)), (Op::Color, 1.0, Some(2))],
    [(Op::Color, 0.8, Some(8)), (Op::Solarize, 0.8, Some(7))],
    [(Op::Sharpness, 0.4, Some(7)), (Op::Invert, 0.6, None)],
    [(Op::ShearX, 0.6, Some(5)), (Op::Equalize, 1.0, None)],
    [(Op::Color, 0.4, Some(0)), (Op::Equalize, 0.6, None)],
    [(Op::Equalize, 0.4, None), (Op::Solarize, 0.2, Some(4))],
    [(Op::Solarize, 0.6, Some(5)), (Op::AutoContrast, 0.6, None)],
    [(Op::Invert, 0.6, None), (Op::Equalize, 1.0, None)],
    [(Op::Color, 0.6, Some(4)), (Op::Contrast, 1.0, Some(8))],
    [(Op::Equalize, 0.8, None), (Op::Equalize, 0.6, None)],
];

/// The cifar10 policy.
pub(super) static CIFAR10: [[Step; 2]; 25] = [
    [(Op::Invert, 0.1, None), (Op::Contrast, 0.2, Some(6))],
    [(Op::Rotate, 0.7, Some(2)), (Op::TranslateX, 0.3, Some(9))],
    [(Op::Sharpness, 0.8, Some(1)), (Op::Sharpness, 0.9, Some(3))],
    [(Op::ShearY, 0.5, Some(8)), (Op::TranslateY, 0.7, Some(9))],
    [(Op::AutoContrast, 0.5, None), (Op::Equalize, 0.9, None)],
    [(Op::ShearY, 0.2, Some(7)), (Op::Posterize, 0.3, Some(7))],
    [(Op::Color, 0.4, Some(3)), (Op::Brightness, 0.6, Some(7))],
    [
        (Op::Sharpness, 0.3, Some(9)),
        (Op::Brightness, 0.7, Some(9)),
    ],
    [(Op::Equalize, 0.6, None), (Op::Equalize, 0.5, None)],
    [(Op::Contrast, 0.6, Some(7)), (Op::Sharpness, 0.6, Some(5))],
    [(Op::Color, 0.7, Some(7)), (Op::TranslateX, 0.5, Some(8))],
    [(Op::Equalize, 0.3, None), (Op::AutoContrast, 0.4, None)],
    [
        (Op::TranslateY, 0.4, Some(3)),
        (Op::Sharpness, 0.2, Some(6)),
    ],
    [(Op::Brightness, 0.9, Some(6)), (Op::Color, 0.2, Some(8))],
    [(Op::Solarize, 0.5, Some(2)), (Op::Invert, 0.0, None)],
    [(Op::Equalize, 0.2, None), (Op::AutoContrast, 0.6, None)],
    [(Op::Equalize, 0.2, None), (Op::Equalize, 0.6, None)],
    [(Op::Color, 0.9, Some(9)), (Op::Equalize, 0.6, None)],
    [(Op::AutoContrast, 0.8, None), (Op::Solarize, 0.2, Some(8))],
    [(Op::Brightness, 0.1, Some(3)), (Op::Color, 0.7, Some(0))],
    [(Op::Solarize, 0.4, Some(5)), (Op::AutoContrast, 0.9, None)],
    [
        (Op::TranslateY, 0.9, Some(9)),
        (Op::TranslateY, 0.7, Some(9)),
    ],
    [(Op::AutoContrast, 0.9, None), (Op::Solarize, 0.8, Some(3))],
    [(Op::Equalize, 0.8, None), (Op::Invert, 0.1, None)],
    [
        (Op::TranslateY, 0.7, Some(9)),
        (Op::AutoContrast, 0.9, None),
    ],
];

/// The svhn policy.
pub(super) static SVHN: [[Step; 2]; 25] = [
    [(Op::ShearX, 0.9, Some(4)), (Op::Invert, 0.2, None)],
    [(Op::ShearY, 0.9, Some(8)), (Op::Invert, 0.7, None)],
    [(Op::Equalize, 0.6, None), (Op::Solarize, 0.6, Some(6))],
    [(Op::Invert, 0.9, None), (Op::Equalize, 0.6, None)],
    [(Op::Equalize, 0.6, None), (Op::Rotate, 0.9, Some(3))],
    [(Op::ShearX, 0.9, Some(4)), (Op::AutoContrast, 0.8, None)],
    [(Op::ShearY, 0.9, Some(8)), (Op::Invert, 0.4, None)],
    [(Op::ShearY, 0.9, Some(5)), (Op::Solarize, 0.2, Some(6))],
    [(Op::Invert, 0.9, None), (Op::AutoContrast, 0.8, None)],
    [(Op::Equalize, 0.6, None), (Op::Rotate, 0.9, Some(3))],
    [(Op::ShearX, 0.9, Some(4)), (Op::Solarize, 0.3, Some(3))],
    [(Op::ShearY, 0.8, Some(8)), (Op::Invert, 0.7, None)],
    [(Op::Equalize, 0.9, None), (Op::TranslateY, 0.6, Some(6))],
    [(Op::Invert, 0.9, None), (Op::Equalize, 0.6, None)],
    [(Op::Contrast, 0.3, Some(3)), (Op::Rotate, 0.8, Some(4))],
    [(Op::Invert, 0.8, None), (Op::TranslateY, 0.0, Some(2))],
    [(Op::ShearY, 0.7, Some(6)), (Op::Solarize, 0.4, Some(8))],
    [(Op::Invert, 0.6, None), (Op::Rotate, 0.8, Some(4))],
    [(Op::ShearY, 0.3, Some(7)), (Op::TranslateX, 0.9, Some(3))],
    [(Op::ShearX, 0.1, Some(6)), (Op::Invert, 0.6, None)],
    [(Op::Solarize, 0.7, Some(2)), (Op::TranslateY, 0.6, Some(7))],
    [(Op::ShearY, 0.8, Some(4)), (Op::Invert, 0.8, None)],
    [(Op::ShearX, 0.7, Some(9)), (Op::TranslateY, 0.8, Some(3))],
    [(Op::ShearY, 0.8, Some(5)), (Op::AutoContrast, 0.7, None)],
    [(Op::ShearX, 0.7, Some(2)), (Op::Invert, 0.1, None)],
];
