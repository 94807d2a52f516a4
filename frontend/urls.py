from django.contrib.auth import views as auth_views
from django.urls import include, path

from frontend.views import (
    dashboard,
    field,
    gap,
    inventory,
    label,
    planner,
    production,
    reliability,
    rounds,
    steering,
    world,
)
from frontend.views.base import home

planner_urls = (
    [
        path("", planner.PlannerHome.as_view(), name="home"),
        path("campaigns/<int:pk>/", planner.CampaignDetail.as_view(), name="campaign"),
        path("deployments/", planner.DeploymentList.as_view(), name="deployments"),
        path("deployments/<int:pk>/", planner.DeploymentDetail.as_view(), name="deployment"),
        path(
            "deployments/<int:pk>/reliability/",
            reliability.DeploymentReliability.as_view(),
            name="deployment-reliability",
        ),
        path("sites/", planner.SiteList.as_view(), name="sites"),
        path("sites/<int:pk>/", planner.SiteDetail.as_view(), name="site"),
        path("embodiments/", planner.EmbodimentList.as_view(), name="embodiments"),
        path("embodiments/<int:pk>/", planner.EmbodimentDetail.as_view(), name="embodiment"),
        path("taxonomy/", planner.Taxonomy.as_view(), name="taxonomy"),
        path("sites/new/", world.SiteCreate.as_view(), name="site-create"),
        path("sites/<int:pk>/edit/", world.SiteEdit.as_view(), name="site-edit"),
        path("deployments/new/", world.DeploymentCreate.as_view(), name="deployment-create"),
        path("deployments/<int:pk>/edit/", world.DeploymentEdit.as_view(), name="deployment-edit"),
        path(
            "deployments/<int:pk>/production/",
            production.DeploymentProduction.as_view(),
            name="deployment-production",
        ),
        path(
            "deployments/<int:pk>/production/job/",
            production.DeploymentProductionProgress.as_view(),
            name="deployment-production-job",
        ),
        path("embodiments/new/", world.EmbodimentCreate.as_view(), name="embodiment-create"),
        path("embodiments/<int:pk>/edit/", world.EmbodimentEdit.as_view(), name="embodiment-edit"),
        path(
            "taxonomy/dimensions/new/",
            world.ConditionDimensionCreate.as_view(),
            name="dimension-create",
        ),
        path(
            "taxonomy/dimensions/<int:pk>/edit/",
            world.ConditionDimensionEdit.as_view(),
            name="dimension-edit",
        ),
        path(
            "taxonomy/failure-modes/new/",
            world.FailureModeCreate.as_view(),
            name="failure-mode-create",
        ),
        path(
            "taxonomy/failure-modes/<int:pk>/edit/",
            world.FailureModeEdit.as_view(),
            name="failure-mode-edit",
        ),
        path("campaigns/<int:pk>/gap/", gap.CampaignGap.as_view(), name="campaign-gap"),
        path("campaigns/<int:pk>/gap/new/", gap.GapReportRequest.as_view(), name="gap-request"),
        path("gap/<int:pk>/", gap.GapReportDetail.as_view(), name="gap-report"),
        path("gap/<int:pk>/progress/", gap.GapReportProgress.as_view(), name="gap-progress"),
        path("gap/<int:pk>/cells/", gap.GapCells.as_view(), name="gap-cells"),
        path("gap/<int:pk>/heatmap/", gap.GapHeatmap.as_view(), name="gap-heatmap"),
        path("gap/<int:pk>/compare/", gap.GapCompare.as_view(), name="gap-compare"),
        path("rounds/new/", rounds.RoundCreate.as_view(), name="round-create"),
        path("evaluations/", steering.Evaluations.as_view(), name="evaluations"),
        path("rounds/<int:pk>/impact/", steering.RoundImpact.as_view(), name="round-impact"),
        path(
            "rounds/<int:pk>/impact/job/",
            steering.RoundImpactProgress.as_view(),
            name="round-impact-job",
        ),
        path(
            "rounds/<int:pk>/recommend/", steering.RoundRecommend.as_view(), name="round-recommend"
        ),
        path(
            "campaigns/<int:pk>/forecast/",
            steering.CampaignForecast.as_view(),
            name="campaign-forecast",
        ),
        path(
            "campaigns/<int:pk>/forecast/job/",
            steering.ForecastProgress.as_view(),
            name="forecast-job",
        ),
        path("rounds/<int:pk>/", rounds.RoundDetail.as_view(), name="round"),
        path("rounds/<int:pk>/job/", rounds.RoundJobProgress.as_view(), name="round-job"),
        path(
            "rounds/<int:pk>/do/<slug:action>/", rounds.RoundAction.as_view(), name="round-action"
        ),
        path("teams/<int:pk>/runsheet/", rounds.TeamRunSheet.as_view(), name="team-runsheet"),
        path(
            "teams/<int:pk>/calendar/rotate/",
            rounds.TeamCalendarRotate.as_view(),
            name="team-calendar-rotate",
        ),
        path("rounds/<int:pk>/progress/", field.RoundProgress.as_view(), name="round-progress"),
        path("tasks/<int:pk>/takes/", field.TaskTakesMatch.as_view(), name="task-takes"),
    ],
    "planner",
)
field_urls = (
    [
        path("", field.FieldToday.as_view(), name="today"),
        path("sw.js", field.FieldServiceWorker.as_view(), name="sw"),
        path("tasks/<int:pk>/photos/", field.FieldTaskPhotos.as_view(), name="task-photos"),
        path("tasks/<int:pk>/captures/", field.FieldTaskCaptures.as_view(), name="task-captures"),
    ],
    "field",
)
label_urls = (
    [
        path("", label.LabelQueue.as_view(), name="queue"),
        path("jobs/<int:pk>/", label.JobDetail.as_view(), name="job"),
        path("jobs/<int:pk>/next/", label.JobNext.as_view(), name="job-next"),
        path("jobs/<int:pk>/settings/", label.JobSettings.as_view(), name="job-settings"),
        path("jobs/<int:pk>/review/", label.JobReview.as_view(), name="review"),
        path("assignments/<int:pk>/", label.AssignmentView.as_view(), name="assignment"),
        path("assignments/<int:pk>/skip/", label.AssignmentSkip.as_view(), name="skip"),
        path("episodes/<int:pk>/media/", label.EpisodeMedia.as_view(), name="episode-media"),
        path(
            "episodes/<int:pk>/playback/",
            label.EpisodePlayback.as_view(),
            name="episode-playback",
        ),
        path(
            "episodes/<int:pk>/video/<str:camera>.mp4",
            label.EpisodeVideo.as_view(),
            name="episode-video",
        ),
        path("episodes/<int:pk>/resolve/", label.EpisodeResolve.as_view(), name="resolve"),
        path("datasets/<int:pk>/job/", label.DatasetJobCreate.as_view(), name="dataset-job"),
        path("datasets/<int:pk>/exports/", label.DatasetExports.as_view(), name="dataset-exports"),
        path("exports/<int:pk>/", label.ExportDetail.as_view(), name="export"),
        path("exports/<int:pk>/progress/", label.ExportProgress.as_view(), name="export-progress"),
        path("exports/<int:pk>/download/", label.ExportDownload.as_view(), name="export-download"),
    ],
    "label",
)
inventory_urls = (
    [
        path("", inventory.InventoryHome.as_view(), name="home"),
        path("imports/rows/", inventory.ImportRows.as_view(), name="import-rows"),
        path("imports/<int:pk>/", inventory.ImportDetail.as_view(), name="import"),
        path(
            "imports/<int:pk>/progress/", inventory.ImportProgress.as_view(), name="import-progress"
        ),
        path("imports/<int:pk>/cancel/", inventory.ImportCancel.as_view(), name="import-cancel"),
        path("datasets/", inventory.DatasetList.as_view(), name="datasets"),
        path("datasets/<int:pk>/", inventory.DatasetDetail.as_view(), name="dataset"),
    ],
    "inventory",
)
dashboard_urls = (
    [
        path("", dashboard.DashboardHome.as_view(), name="home"),
        path("<slug:slug>/", dashboard.CustomerDashboard.as_view(), name="customer"),
        path("<slug:slug>/share/", dashboard.ShareCreate.as_view(), name="share-create"),
        path("shares/<int:pk>/revoke/", dashboard.ShareRevoke.as_view(), name="share-revoke"),
    ],
    "dashboard",
)

urlpatterns = [
    path("", home, name="home"),
    path(
        "login/",
        auth_views.LoginView.as_view(redirect_authenticated_user=True),
        name="login",
    ),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("calendar/<str:token>.ics", rounds.team_calendar, name="team-calendar"),
    path("share/<str:token>/", dashboard.shared_dashboard, name="dashboard-share"),
    path("planner/", include(planner_urls)),
    path("field/", include(field_urls)),
    path("label/", include(label_urls)),
    path("inventory/", include(inventory_urls)),
    path("dashboard/", include(dashboard_urls)),
]
