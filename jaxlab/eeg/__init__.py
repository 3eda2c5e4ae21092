"""P10 eeg: L-FAME-style meditation-EEG benchmark framework (simulator, loaders,
preprocessing with optional ICA, features, covariance geometry, evaluation protocols,
classical and deep baselines).

Example: `examples/eeg.py` (a jupytext notebook; rendered in the docs site).
"""

from ._baselines import CLASSICAL_MODELS as CLASSICAL_MODELS
from ._baselines import TangentSpaceFeatures as TangentSpaceFeatures
from ._baselines import cross_validate as cross_validate
from ._baselines import make_classifier as make_classifier
from ._data import CONDITIONS as CONDITIONS
from ._data import GROUPS as GROUPS
from ._data import SESSIONS as SESSIONS
from ._data import EEGDataset as EEGDataset
from ._data import EpochTable as EpochTable
from ._deep import ClassifierStep as ClassifierStep
from ._deep import DeepConvNet as DeepConvNet
from ._deep import EEGNet as EEGNet
from ._deep import ShallowConvNet as ShallowConvNet
from ._deep import TrainedClassifier as TrainedClassifier
from ._deep import train_classifier as train_classifier
from ._evaluate import balanced_accuracy as balanced_accuracy
from ._evaluate import fold_ci as fold_ci
from ._evaluate import leave_subjects_out as leave_subjects_out
from ._evaluate import macro_f1 as macro_f1
from ._features import BANDS as BANDS
from ._features import band_powers as band_powers
from ._features import covariances as covariances
from ._features import frontal_alpha_asymmetry as frontal_alpha_asymmetry
from ._features import relative_powers as relative_powers
from ._features import spectral_entropy as spectral_entropy
from ._features import spectral_features as spectral_features
from ._features import welch as welch
from ._ica import ica_clean as ica_clean
from ._io import concat_tables as concat_tables
from ._io import dataset_from_raws as dataset_from_raws
from ._io import raw_from_block as raw_from_block
from ._io import read_bids as read_bids
from ._io import read_dataset as read_dataset
from ._io import table_from_epochs as table_from_epochs
from ._montage import STANDARD_1020 as STANDARD_1020
from ._montage import channel_indices as channel_indices
from ._montage import channel_positions as channel_positions
from ._preprocess import bandpass as bandpass
from ._preprocess import epoch as epoch
from ._preprocess import epoch_indices as epoch_indices
from ._preprocess import make_epochs as make_epochs
from ._preprocess import notch as notch
from ._preprocess import preprocess_dataset as preprocess_dataset
from ._preprocess import reject_amplitude as reject_amplitude
from ._preprocess import rereference as rereference
from ._riemann import euclidean_alignment as euclidean_alignment
from ._riemann import log_euclidean_mean as log_euclidean_mean
from ._riemann import recenter as recenter
from ._riemann import spd_exp as spd_exp
from ._riemann import spd_log as spd_log
from ._riemann import spd_power as spd_power
from ._riemann import tangent_space as tangent_space
from ._simulate import SimulationConfig as SimulationConfig
from ._simulate import simulate as simulate
