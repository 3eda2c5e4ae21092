"""P15 stereo: census/Hamming matching costs, semi-global matching in JAX, stereo and
face-specific metrics (IR, L3DE), and the real Middlebury pair shipped by scikit-image."""

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
from ._sgm import sgm_aggregate as sgm_aggregate
from ._sgm import sgm_disparity as sgm_disparity
from ._sgm import subpixel_argmin as subpixel_argmin
