from rest_framework.routers import DefaultRouter

from accounts.apis import JobViewSet
from campaigns.apis import CampaignViewSet, FieldTeamViewSet, RoundViewSet
from sites.apis import (
    ConditionDimensionViewSet,
    DeploymentViewSet,
    EmbodimentViewSet,
    FailureModeViewSet,
    FailureRecordViewSet,
    SiteViewSet,
    TaskViewSet,
)

router = DefaultRouter()
router.register("jobs", JobViewSet, basename="job")
router.register("sites", SiteViewSet, basename="site")
router.register("embodiments", EmbodimentViewSet, basename="embodiment")
router.register("tasks", TaskViewSet, basename="task")
router.register("deployments", DeploymentViewSet, basename="deployment")
router.register("condition-dimensions", ConditionDimensionViewSet, basename="condition-dimension")
router.register("failure-modes", FailureModeViewSet, basename="failure-mode")
router.register("failure-records", FailureRecordViewSet, basename="failure-record")
router.register("campaigns", CampaignViewSet, basename="campaign")
router.register("rounds", RoundViewSet, basename="round")
router.register("teams", FieldTeamViewSet, basename="team")

urlpatterns = router.urls
