"""P11 em: synthetic EM of neural tissue with instance ground truth, low-resolution
degradations (x2 / x4), bicubic baseline, watershed instance segmentation, the
scikit-image metrics (PSNR, SSIM, VOI split/merge, adapted Rand error, CREMI score)
and a loader for real EM stacks (HDF5 / TIFF, never downloaded).

Example: `examples/em.py` (a jupytext notebook; rendered in the docs site).
"""

from ._degrade import SUPPORTED_FACTORS as SUPPORTED_FACTORS
from ._degrade import degrade as degrade
from ._degrade import gaussian_blur as gaussian_blur
from ._degrade import upsample_bicubic as upsample_bicubic
from ._generate import REGIMES as REGIMES
from ._generate import EMRegime as EMRegime
from ._generate import EMSample as EMSample
from ._generate import clean_labels as clean_labels
from ._generate import generate_em as generate_em
from ._generate import generate_em_dataset as generate_em_dataset
from ._generate import label_boundaries as label_boundaries
from ._generate import render_em as render_em
from ._generate import tessellate as tessellate
from ._io import load_em_volume as load_em_volume
from ._metrics import adapted_rand_error as adapted_rand_error
from ._metrics import boundary_f1 as boundary_f1
from ._metrics import cremi_score as cremi_score
from ._metrics import psnr as psnr
from ._metrics import segmentation_scores as segmentation_scores
from ._metrics import ssim as ssim
from ._metrics import variation_of_information as variation_of_information
from ._segment import merge_small_segments as merge_small_segments
from ._segment import relabel_connected as relabel_connected
from ._segment import segment_watershed as segment_watershed

# Models (shared-encoder U-Nets, learned embedding, partial-diffusion refiner), their
# training and the four P11 methods.
# isort: split
from ._blocks import pixel_shuffle as pixel_shuffle
from ._blocks import pixel_unshuffle as pixel_unshuffle
from ._diffusion import Denoiser as Denoiser
from ._diffusion import NoiseSchedule as NoiseSchedule
from ._diffusion import cosine_schedule as cosine_schedule
from ._diffusion import linear_schedule as linear_schedule
from ._diffusion import make_schedule as make_schedule
from ._diffusion import q_sample as q_sample
from ._diffusion import refine_embedding as refine_embedding
from ._diffusion import refine_timesteps as refine_timesteps
from ._diffusion import structure_embedding as structure_embedding
from ._embed import AbstractEmbedding as AbstractEmbedding
from ._embed import Embedder as Embedder
from ._embed import LearnedEmbedding as LearnedEmbedding
from ._embed import StructureEmbedding as StructureEmbedding
from ._joint import JointOutput as JointOutput
from ._joint import JointSRSeg as JointSRSeg
from ._methods import METHODS as METHODS
from ._methods import MethodPrediction as MethodPrediction
from ._methods import MethodsConfig as MethodsConfig
from ._methods import TrainedMethods as TrainedMethods
from ._methods import embed_images as embed_images
from ._methods import predict_method as predict_method
from ._methods import refine_dataset as refine_dataset
from ._methods import train_methods as train_methods
from ._train import MAX_STEPS as MAX_STEPS
from ._train import DenoiserObjective as DenoiserObjective
from ._train import JointObjective as JointObjective
from ._train import ObjectiveStep as ObjectiveStep
from ._train import SegObjective as SegObjective
from ._train import SRObjective as SRObjective
from ._train import balanced_bce as balanced_bce
from ._train import fit as fit
from ._train import init_params as init_params
from ._train import reconstruction_loss as reconstruction_loss
from ._unet import SegDecoder as SegDecoder
from ._unet import SegNet as SegNet
from ._unet import SRDecoder as SRDecoder
from ._unet import SRNet as SRNet
from ._unet import UNetDecoder as UNetDecoder
from ._unet import UNetEncoder as UNetEncoder
