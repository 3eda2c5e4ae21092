"""P15 stereo: census/Hamming matching costs, semi-global matching in JAX, stereo and
face-specific metrics (IR, L3DE), a small learned matcher (RAFT-Stereo-lite in flax) with
its training loop, and the real Middlebury pair shipped by scikit-image.

Example: `examples/stereo.py` (a jupytext notebook; rendered in the docs site).
"""

from ._faces import LANDMARK_NAMES as LANDMARK_NAMES
from ._faces import FaceScene as FaceScene
from ._faces import FaceStereoDataset as FaceStereoDataset
from ._faces import face_landmarks as face_landmarks
from ._faces import face_sdf as face_sdf
from ._faces import render_dataset as render_dataset
from ._faces import render_pair as render_pair
from ._faces import rig_configurations as rig_configurations
from ._faces import sample_face_scene as sample_face_scene
from ._faces import write_face_shards as write_face_shards
from ._learned import INIT_SIDE_CAP as INIT_SIDE_CAP
from ._learned import RaftStep as RaftStep
from ._learned import init_raft as init_raft
from ._learned import raft_disparity as raft_disparity
from ._learned import raft_loss as raft_loss
from ._learned import raft_optimizer as raft_optimizer
from ._learned import raft_predictor as raft_predictor
from ._learned import train_raft as train_raft
from ._matching import block_matching as block_matching
from ._matching import census_cost_volume as census_cost_volume
from ._matching import census_transform as census_transform
from ._metrics import bad_pixel_rate as bad_pixel_rate
from ._metrics import delta1 as delta1
from ._metrics import depth_to_disparity as depth_to_disparity
from ._metrics import disparity_to_depth as disparity_to_depth
from ._metrics import epe as epe
from ._metrics import inlier_ratio as inlier_ratio
from ._metrics import landmark_3d_error as landmark_3d_error
from ._metrics import rmse as rmse
from ._middlebury import load_motorcycle as load_motorcycle
from ._raft import RAFTStereo as RAFTStereo
from ._raft import convex_upsample as convex_upsample
from ._raft import correlation_pyramid as correlation_pyramid
from ._raft import correlation_volume as correlation_volume
from ._raft import lookup_pyramid as lookup_pyramid
from ._render import StereoRig as StereoRig
from ._render import backproject as backproject
from ._render import camera_rays as camera_rays
from ._render import project_points as project_points
from ._render import sdf_normals as sdf_normals
from ._render import sphere_trace as sphere_trace
from ._sgm import sgm_aggregate as sgm_aggregate
from ._sgm import sgm_disparity as sgm_disparity
from ._sgm import subpixel_argmin as subpixel_argmin
