//! The steps, by kind: crops, flips, resizes, colour, the automatic
//! augmentation policies and erasing (with the PIL operations they share).

mod augment;
mod color;
mod crop;
mod flip;
mod ops;
mod policies;
mod resize;

pub use augment::{
    AutoAugment, AutoAugmentPolicy, EraseValue, PolicyStep, RandAugment, RandomErasing,
    TrivialAugmentWide,
};
pub use color::{ColorJitter, ToRgb};
pub use crop::{CenterCrop, Crop, RandomCrop};
pub use flip::RandomFlip;
pub use ops::{Interpolation, Op};
pub use resize::{RandomResizedCrop, Region, Resize, ResizeFilter, ResizeShorter, resize_region};
