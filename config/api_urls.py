from rest_framework.routers import DefaultRouter

from accounts.apis import JobViewSet
from analytics.apis import (
    EvaluationRunViewSet,
    GapReportViewSet,
    PolicyVersionViewSet,
    RoundImpactViewSet,
    RoundPlanningViewSet,
)
from analytics.production_apis import ProductionEventViewSet
from campaigns.apis import CampaignViewSet, CollectionTaskViewSet, FieldTeamViewSet, TargetViewSet
from campaigns.field.apis import FieldPhotoViewSet, FieldRecordViewSet, FieldTaskViewSet
from campaigns.recording_apis import (
    CollectionTaskRecordings,
    FailureRecordRecordings,
    RecordingUploadViewSet,
)
from labeling.apis import DatasetViewSet, EpisodeViewSet, InventoryImportViewSet
from labeling.exports.apis import DatasetExportViewSet
from labeling.labels.apis import (
    AnnotationViewSet,
    GoldLabelViewSet,
    LabelAssignmentViewSet,
    LabelJobViewSet,
    ReviewViewSet,
)
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
router.register("rounds", RoundPlanningViewSet, basename="round")
router.register("targets", TargetViewSet, basename="target")
router.register("collection-tasks", CollectionTaskViewSet, basename="collection-task")
router.register("teams", FieldTeamViewSet, basename="team")
router.register("imports", InventoryImportViewSet, basename="inventory-import")
router.register("datasets", DatasetViewSet, basename="dataset")
router.register("episodes", EpisodeViewSet, basename="episode")
router.register("label-jobs", LabelJobViewSet, basename="label-job")
router.register("assignments", LabelAssignmentViewSet, basename="label-assignment")
router.register("annotations", AnnotationViewSet, basename="annotation")
router.register("reviews", ReviewViewSet, basename="review")
router.register("gold-labels", GoldLabelViewSet, basename="gold-label")
router.register("exports", DatasetExportViewSet, basename="dataset-export")
router.register("field/tasks", FieldTaskViewSet, basename="field-task")
router.register("field/records", FieldRecordViewSet, basename="field-record")
router.register("field/photos", FieldPhotoViewSet, basename="field-photo")
router.register("gap-reports", GapReportViewSet, basename="gap-report")
router.register("collection-tasks", CollectionTaskRecordings, basename="task-recordings")
router.register("recording-uploads", RecordingUploadViewSet, basename="recording-upload")
router.register("failure-records", FailureRecordRecordings, basename="failure-record-recordings")
router.register("policy-versions", PolicyVersionViewSet, basename="policy-version")
router.register("evaluations", EvaluationRunViewSet, basename="evaluation")
router.register("round-impacts", RoundImpactViewSet, basename="round-impact")
router.register("production/events", ProductionEventViewSet, basename="production-event")

urlpatterns = router.urls
