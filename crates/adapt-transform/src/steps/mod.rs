//! The steps, by kind: crops, flips, resizes, colour.

mod color;
mod crop;
mod flip;
mod resize;

pub use color::{ColorJitter, ToRgb};
pub use crop::{CenterCrop, Crop, RandomCrop};
pub use flip::RandomFlip;
pub use resize::{RandomResizedCrop, Region, Resize, ResizeFilter, ResizeShorter, resize_region};
