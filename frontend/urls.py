from django.contrib.auth import views as auth_views
from django.urls import include, path

from frontend.views import dashboard, field, label, planner
from frontend.views.base import home

planner_urls = (
    [
        path("", planner.PlannerHome.as_view(), name="home"),
        path("campaigns/<int:pk>/", planner.CampaignDetail.as_view(), name="campaign"),
        path("deployments/", planner.DeploymentList.as_view(), name="deployments"),
        path("deployments/<int:pk>/", planner.DeploymentDetail.as_view(), name="deployment"),
        path("sites/", planner.SiteList.as_view(), name="sites"),
        path("sites/<int:pk>/", planner.SiteDetail.as_view(), name="site"),
        path("embodiments/", planner.EmbodimentList.as_view(), name="embodiments"),
        path("embodiments/<int:pk>/", planner.EmbodimentDetail.as_view(), name="embodiment"),
        path("taxonomy/", planner.Taxonomy.as_view(), name="taxonomy"),
    ],
    "planner",
)
field_urls = ([path("", field.FieldToday.as_view(), name="today")], "field")
label_urls = ([path("", label.LabelQueue.as_view(), name="queue")], "label")
dashboard_urls = (
    [
        path("", dashboard.DashboardHome.as_view(), name="home"),
        path("<slug:slug>/", dashboard.CustomerDashboard.as_view(), name="customer"),
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
    path("planner/", include(planner_urls)),
    path("field/", include(field_urls)),
    path("label/", include(label_urls)),
    path("dashboard/", include(dashboard_urls)),
]
