//! Integration tests of adapt-transform: its operations against
//! torchvision's own on a PIL image (a committed fixture), and the random
//! policies by the distribution of what they do.

mod policies;
mod torchvision;
